"""Consume a Pulsar topic until Ctrl-C, the way programs written for the
official client do: ``receive()`` in a loop, and ``pulsar.Interrupted`` (which
Ctrl-C raises inside ``receive()``) as the way out.

    python examples/pulsar_consumer.py [SERVICE_URL] [TOPIC]

The program is the official client's usual consumer loop with only the
import changed: ``import pulsarfast as pulsar``.
"""
import sys

import pulsarfast as pulsar


def main(service_url: str = "pulsar://localhost:6650", topic: str = "my-topic") -> None:
    client = pulsar.Client(service_url)
    consumer = client.subscribe(topic, "my-subscription", consumer_type=pulsar.ConsumerType.Shared)
    print("Receiving from %s (Ctrl-C to stop)" % topic, flush=True)
    while True:
        try:
            msg = consumer.receive()
        except pulsar.Interrupted:
            print("Stop receiving messages", flush=True)
            break
        print("Received message %r id=%s" % (msg.data().decode("utf-8"), msg.message_id()), flush=True)
        consumer.acknowledge(msg)
    client.close()


if __name__ == "__main__":
    main(*sys.argv[1:3])
