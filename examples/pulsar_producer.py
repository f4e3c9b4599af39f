"""Publish ten messages to a Pulsar topic and wait for each receipt, the way
programs written for the official client do.

    python examples/pulsar_producer.py [SERVICE_URL] [TOPIC]

Only the import differs from such a program: ``import pulsarfast as pulsar``.
"""
import sys

import pulsarfast as pulsar


def main(service_url: str = "pulsar://localhost:6650", topic: str = "my-topic") -> None:
    client = pulsar.Client(service_url)
    producer = client.create_producer(topic)
    for i in range(10):
        message_id = producer.send(("hello-pulsar-%d" % i).encode("utf-8"))
        print("Sent hello-pulsar-%d as %s" % (i, message_id), flush=True)
    client.close()


if __name__ == "__main__":
    main(*sys.argv[1:3])
