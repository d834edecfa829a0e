from pytest_llmperf.client.sse import SSEParser


def test_events_split_and_packed_across_feeds() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: one\n\nda") == ["one"]
    assert parser.feed(b"ta: two\n\ndata: three\n\n") == ["two", "three"]


def test_crlf_split_between_reads_is_one_line_end() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\n\r\n") == ["a"]


def test_comments_fields_and_multiline_data() -> None:
    parser = SSEParser()
    events = parser.feed(b": ping\n\nevent: error\nid: 3\ndata: x\ndata: y\n\n")
    assert events == ["x\ny"]
    assert parser.last_event_type == "error"


def test_close_flushes_an_unterminated_event() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: [DONE]") == []
    assert parser.close() == ["[DONE]"]


def test_whole_event_fast_path_agrees_with_the_line_by_line_parse() -> None:
    """Feeding whole ``data:`` events (the fast path) gives what byte-by-byte feeding gives."""
    import random

    rng = random.Random(3)
    pieces = [
        b"data: {}\n\n",
        b"data:{}\n\n",
        b'data: {"a":"\xc3\xa9"}\n\n',
        b"data: \xff\xfe bad bytes\n\n",  # not UTF-8: replaced alike on both paths
        b"data: cut \xc3\n\n",  # a character cut at the event's end
        b"data: \xe2\x82\xac euro\n\n",
        b": keep-alive\n\n",
        b"event: x\ndata: 1\n\n",
        b"data: a\ndata: b\n\n",
        b"data: c\r\n\r\n",
        b"data: [DONE]\n\n",
        b"\n\n",
    ]
    for _ in range(300):
        stream = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 8)))
        whole = SSEParser()
        expected = SSEParser()
        by_byte = [e for i in range(len(stream)) for e in expected.feed(stream[i : i + 1])]
        assert whole.feed(stream) + whole.close() == by_byte + expected.close(), stream
