#: ``[cache]`` for benches that measure searching: no cached answers, no shared fan-outs
#: (snapshots stay on: a truncated first page keeps one, as served).
NO_CACHE = {"answer_ttl_s": 0, "single_flight": False}
