"""The Prometheus answer read as it streams: elements one at a time whatever the chunking, hostile shapes refused in
one line, a drip costs linear time."""

from __future__ import annotations

import json
import time

import pytest

from kvplan.diagnose.promjson import ArrayStream, PromJsonError

MATRIX = {"status": "success", "data": {"resultType": "matrix", "result": [
    {"metric": {"instance": f"h:{i}"}, "values": [[1, "2"], [2, "3.5"]]} for i in range(500)]}, "warnings": ["w"]}


@pytest.mark.parametrize("chunk", [1, 7, 100, 4096, 1 << 20])
def test_every_element_whatever_the_chunks(chunk):
    body, got = json.dumps(MATRIX).encode(), []
    s = ArrayStream(("data", "result"), got.append)
    for i in range(0, len(body), chunk):
        s.feed(body[i:i + chunk])
    s.close()
    assert got == MATRIX["data"]["result"] and s.status == "success" and s.result_type == "matrix"


def test_series_answer_and_utf8_split_across_chunks():
    body, got = json.dumps({"status": "success", "data": [{"pod": "é" * 3}, {"pod": "x"}]},
                           ensure_ascii=False).encode(), []
    s = ArrayStream(("data",), got.append)
    for i in range(len(body)):
        s.feed(body[i:i + 1])
    s.close()
    assert got == [{"pod": "ééé"}, {"pod": "x"}]


@pytest.mark.parametrize("body,match", [
    (b"[1]", "not a JSON object"),
    (b'{"status":"error","errorType":"bad_data","error":"parse error"}', "Prometheus said: parse error"),
    (b'{"status":"success","data":{"resultType":"matrix","result":[{"a":1}', r"ended before its data.result array"),
    (b'{"status":"success","data":{"result":{}}}', "not a JSON array"),
    (b'{"data":{"result":[]}}', "status is None"),
    (b'{"x":"' + b"a" * 70000, "first 64 KiB"),
    (b'{"status":"success","data":{"result":[' + b"[" * 100000 + b"]" * 100000 + b"]}}", "nested too deeply"),
    (b'{"status":"success","data":{"result":[{"a":"' + b"x" * 1100000, "longer than 1,048,576"),
    (b'{"status":"success","data":{"result":[{"a":1} {"b":2}]}}', "expected ',' or ']'"),
])
def test_hostile_shapes_are_one_line_errors(body, match):
    s = ArrayStream(("data", "result"), lambda el: None)
    with pytest.raises(PromJsonError, match=match) as e:
        s.feed(body)
        s.close()
    assert "\n" not in str(e.value)


def test_a_drip_costs_linear_time():
    el = b'{"metric":{},"values":[' + b",".join(b'[1,"2"]' for _ in range(100000)) + b"]}"
    body = b'{"status":"success","data":{"resultType":"matrix","result":[' + el + b"]}}"
    got: list = []
    s = ArrayStream(("data", "result"), got.append)
    t = time.process_time()
    for i in range(0, len(body), 16):
        s.feed(body[i:i + 16])
    s.close()
    assert len(got[0]["values"]) == 100000
    assert time.process_time() - t < 5  # 0.4 s here: each retry waits for the text to double
