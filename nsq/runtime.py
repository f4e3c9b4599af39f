"""``nsq.runtime`` is ``msgengine.runtime``: the protocol-neutral runtime lives in the engine
package; this name is kept for code written against earlier versions."""
import sys

import msgengine.runtime

sys.modules[__name__] = msgengine.runtime
