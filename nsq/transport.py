"""``nsq.transport`` is ``msgengine.transport``: the protocol-neutral transport lives in the engine
package; this name is kept for code written against earlier versions."""
import sys

import msgengine.transport

sys.modules[__name__] = msgengine.transport
