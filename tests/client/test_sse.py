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
