"""python -m pulsarfast.cli: the same as the pulsarfast command."""
from pulsarfast.cli import console_main

console_main()
