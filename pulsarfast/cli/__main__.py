"""python -m pulsarfast.cli: the same as the pulsarfast command."""
from . import console_main

console_main()
