"""What every program in this folder shares: its servers and topic, from the environment."""
import json
import os
import sys

NSQD_TCP = os.environ["NSQD_TCP"]
NSQD_HTTP = os.environ.get("NSQD_HTTP", "")
LOOKUPD_HTTP = os.environ.get("LOOKUPD_HTTP", "")
TOPIC = os.environ["TOPIC"]
COUNT = int(os.environ.get("COUNT", "100"))


def report(**fields):
    """The program's result: one JSON line on stdout."""
    sys.stdout.write(json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()
