"""python -m nsq.cli: the same as the nsqfast command."""
from . import console_main

console_main()
