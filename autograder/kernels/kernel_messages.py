"""What the grader reads of a graded kernel's messages: nothing larger than it can afford.

A kernel is the student's code, and decoding its JSON costs the grader many times the message's size (a
list of empty lists: 25-65x), in the grading process, outside the kernel's memory cap. So on the grader's
sockets a frame over MAX_FRAME_BYTES drops the connection before it is read (the cell then times out); a
message whose header, parent or metadata is over MAX_HEADER_BYTES is an error of that notebook's; one whose
content is over MAX_DECODED_BYTES, or whose binary buffers together are, is never decoded: an output becomes
a one-line note (its buffers let go), anything else an error. A check's result is at most
wire.MAX_PAYLOAD_BYTES (4 MB) and a figure a few hundred kB, so no output of a real answer comes near.
Not bounded: how many frames one message has (zmq hands the grader the whole message), so a kernel can still
make the grading process hold a few GB for a moment (docs/trust.md).
"""
from jupyter_client.session import Session

MAX_FRAME_BYTES = 16 * 2**20
MAX_DECODED_BYTES = 8 * 2**20
MAX_HEADER_BYTES = 64 * 2**10  # a header, parent header or metadata: a few hundred bytes
OUTPUT_TYPES = {"stream", "display_data", "update_display_data", "execute_result", "error"}
DROPPED = f"\n…（这条输出超过 {MAX_DECODED_BYTES // 2**20} MB，评分时没有读取，已丢弃）\n"


class MessageTooLarge(ValueError):
    pass


class BoundedSession(Session):
    """A Session that decodes no header over MAX_HEADER_BYTES and no content or buffers over MAX_DECODED_BYTES
    (the signature is still checked)."""

    def deserialize(self, msg_list, content=True, copy=True):
        sizes = [len(part) for part in msg_list[1:5]]  # bytes or zmq frames
        if max(sizes[:3], default=0) > MAX_HEADER_BYTES:
            raise MessageTooLarge(f"内核发来的消息头超过 {MAX_HEADER_BYTES // 2**10} kB，未读取")
        carried = sizes[3:4] + [sum(len(part) for part in msg_list[5:])]
        if not content or max(carried) <= MAX_DECODED_BYTES:
            return super().deserialize(msg_list, content=content, copy=copy)
        msg = super().deserialize(msg_list[:5], content=False, copy=copy)
        if msg["msg_type"] not in OUTPUT_TYPES:
            raise MessageTooLarge(f"内核发来的 {msg['msg_type']!r} 消息超过 {MAX_DECODED_BYTES // 2**20} MB，未读取")
        if self.auth is not None:
            self._add_digest(msg_list[0])  # what the plain path records of a message it unpacked
        msg["msg_type"] = msg["header"]["msg_type"] = "stream"
        msg["content"], msg["buffers"] = {"name": "stdout", "text": DROPPED}, []
        return msg
