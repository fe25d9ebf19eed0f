"""The grader's kernel sessions (autograder/kernels/kernel_messages.py, both paths): a message part too large to
decode is never decoded; a real message reads as it always did; the signature is still checked."""
import pytest
import zmq
from jupyter_client.session import Session

from autograder.kernels.kernel_messages import DROPPED, MAX_DECODED_BYTES, MAX_HEADER_BYTES, BoundedSession, MessageTooLarge

KEY = b"w1d1-test-key"


def wire(msg_type, content, buffers=(), metadata=None, frames=False):
    sender = Session(key=KEY)
    msg = sender.msg(msg_type, content=content, metadata=metadata or {})
    parts = sender.serialize(msg)
    _, parts = sender.feed_identities(parts + list(buffers))
    return [zmq.Frame(p) for p in parts] if frames else parts


def read(parts, copy=True):
    return BoundedSession(key=KEY).deserialize(parts, copy=copy)


@pytest.mark.parametrize("frames", [False, True])
def test_a_real_output_reads_as_before(frames):
    parts = wire("display_data", {"data": {"text/plain": "x" * 1000}, "metadata": {}}, frames=frames)
    msg = read(parts, copy=not frames)
    assert msg["msg_type"] == "display_data" and msg["content"]["data"]["text/plain"] == "x" * 1000


@pytest.mark.parametrize("frames", [False, True])
def test_an_output_too_large_to_decode_becomes_a_note(frames):
    text = b'{"name": "stdout", "text": [' + b"[]," * (MAX_DECODED_BYTES // 3) + b"[]]}"
    msg = read(wire("stream", text, frames=frames), copy=not frames)
    assert msg["msg_type"] == "stream" and msg["content"] == {"name": "stdout", "text": DROPPED}


def test_buffers_too_large_together_make_an_output_a_note():
    chunk = b"\0" * (MAX_DECODED_BYTES // 3 + 1)
    msg = read(wire("display_data", {"data": {}, "metadata": {}}, buffers=[chunk] * 3))
    assert msg["content"]["text"] == DROPPED and msg["buffers"] == []


def test_anything_but_an_output_too_large_is_an_error():
    with pytest.raises(MessageTooLarge):
        read(wire("comm_msg", {"data": "x" * (MAX_DECODED_BYTES + 1)}))
    with pytest.raises(MessageTooLarge):
        read(wire("stream", {"name": "stdout", "text": "x"}, metadata={"pad": "x" * MAX_HEADER_BYTES}))


def test_a_large_message_is_still_signed():
    parts = wire("stream", {"name": "stdout", "text": "x" * (MAX_DECODED_BYTES + 1)})
    parts[4] = parts[4].replace(b"xxxx", b"yyyy", 1)
    with pytest.raises(ValueError, match="Invalid Signature"):
        read(parts)
