"""python -m nsq.cli: the same as the nsqfast command."""
from nsq.cli import console_main

console_main()
