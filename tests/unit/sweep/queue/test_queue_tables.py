import hashlib
import random

import pytest

from airflow_atlas.encoding import encode_var_long, encode_var_signed_long
from airflow_atlas.errors import CorruptQueueDataError, InvalidInputError
from airflow_atlas.kvs.api import Cell
from airflow_atlas.kvs.tables import SweepStrategy, WriteMode
from airflow_atlas.sweep.queue import queue_tables as q
from airflow_atlas.sweep.queue.metadata import TargetedSweepMetadata as M


def _prefix(components: bytes) -> bytes:
    return hashlib.blake2b(components).digest()[:8]


def test_table_names_and_modes():
    assert q.SWEEPABLE_CELLS == "_sweep_cells"
    assert q.SWEEPABLE_TIMESTAMPS == "_sweep_timestamps"
    assert q.SWEEP_PROGRESS == "_sweep_progress"
    assert q.QUEUE_TABLES[q.SWEEPABLE_CELLS].write_mode is WriteMode.LOGICAL
    assert q.QUEUE_TABLES[q.SWEEPABLE_TIMESTAMPS].write_mode is WriteMode.LOGICAL
    assert q.QUEUE_TABLES[q.SWEEP_PROGRESS].write_mode is WriteMode.LWT
    assert all(m.strategy is SweepStrategy.NOTHING for m in q.QUEUE_TABLES.values())


def test_conservative_flag():
    assert q.conservative_flag(SweepStrategy.CONSERVATIVE) is True
    assert q.conservative_flag("thorough") is False
    with pytest.raises(InvalidInputError):
        q.conservative_flag(SweepStrategy.NOTHING)
    assert q.strategy_of_flag(True) is SweepStrategy.CONSERVATIVE


def test_cells_row_exact_bytes():
    components = encode_var_long(1234) + M(True, False, 7, 0).to_bytes()
    assert q.non_dedicated_row(1234, 7, True) == _prefix(components) + components
    ts = 10**12 + 17
    components = encode_var_long(ts) + M(False, True, 255, 63).to_bytes()
    assert q.dedicated_row(ts, 255, False, 63) == _prefix(components) + components
    decoded = q.decode_cells_row(q.dedicated_row(ts, 255, False, 63))
    assert decoded == q.CellsRow(ts, M(False, True, 255, 63))


def test_cells_column_exact_bytes_and_order():
    assert q.cells_column(49_999, -3) == encode_var_long(49_999) + encode_var_signed_long(-3)
    rng = random.Random(7)
    pairs = {(rng.randrange(50_000), rng.randrange(-64, 100_000)) for _ in range(3000)}
    pairs |= {(0, -64), (0, 0), (127, 99_999), (128, -1), (49_999, 99_999)}
    by_bytes = sorted(pairs, key=lambda p: q.cells_column(*p))
    assert by_bytes == sorted(pairs)
    for p in pairs:
        assert q.decode_cells_column(q.cells_column(*p)) == p
        # column range bounds: start(m) <= every column of m < start(m + 1)
        assert q.cells_column_start(p[0]) <= q.cells_column(*p) < q.cells_column_start(p[0] + 1)


def test_timestamps_row_and_column():
    components = encode_var_long(3) + encode_var_long(100_000) + b"\x01"
    assert q.timestamps_row(3, 100_000, True) == _prefix(components) + components
    assert q.decode_timestamps_row(q.timestamps_row(3, 100_000, True)) == q.TimestampsRow(3, 100_000, True)
    assert q.decode_timestamps_row(q.timestamps_row(0, 0, False)) == q.TimestampsRow(0, 0, False)
    assert q.timestamps_column(20_000_000) == encode_var_long(20_000_000)
    fines = [0, 1, 127, 128, 199, 16_383, 16_384, 20_000_000, 2**40]
    assert sorted(fines, key=q.timestamps_column) == fines
    assert [q.decode_timestamps_column(q.timestamps_column(f)) for f in fines] == fines
    assert q.timestamps_cell(1, 201, False) == Cell(q.timestamps_row(1, 1, False), encode_var_long(201))


def test_progress_row_and_values():
    components = encode_var_signed_long(-1) + b"\x01"
    assert q.NUMBER_OF_SHARDS_CELL == Cell(_prefix(components) + components, b"v")
    for shard in (-1, 0, 255):
        for c in (False, True):
            assert q.decode_progress_row(q.progress_row(shard, c)) == q.ProgressRow(shard, c)
    for v in (-1, 0, 1, 10**12, (1 << 63) - 1):
        assert q.decode_progress_value(q.encode_progress_value(v)) == v
    assert q.encode_progress_value(5) == b"\x05"


def test_dedicated_reference_value():
    assert q.decode_dedicated_reference(q.encode_dedicated_reference(100_050)) == 100_050
    for bad in (b"", b"\x02\x05", b"\x01", b"\x01\x00", b"\x01\x05\x00"):
        with pytest.raises(CorruptQueueDataError):
            q.decode_dedicated_reference(bad)


def test_rows_hash_differently():
    rows = {q.non_dedicated_row(f, 0, False)[:8] for f in range(1000)}
    assert len(rows) == 1000


@pytest.mark.parametrize(
    "decoder, data",
    [
        (q.decode_cells_row, b"\x00" * 8 + b"\x05\x00\x00\x00\x00"),  # wrong hash prefix
        (q.decode_cells_row, _prefix(b"\x05\x00\x00\x00") + b"\x05\x00\x00\x00"),  # 3 metadata bytes
        (q.decode_cells_row, _prefix(b"\x05\x00\x01\x00\x00") + b"\x05\x00\x01\x00\x00"),  # ordinal, non-dedicated
        (q.decode_cells_row, b"short"),
        (q.decode_cells_column, encode_var_long(50_000) + b"\x80"),  # modulus out of range
        (q.decode_cells_column, encode_var_long(5)),  # no write index
        (q.decode_cells_column, encode_var_long(5) + encode_var_signed_long(-65)),
        (q.decode_cells_column, encode_var_long(5) + encode_var_signed_long(100_000)),
        (q.decode_cells_column, encode_var_long(5) + encode_var_signed_long(0) + b"\x00"),
        (q.decode_cells_column, b"\x80\x05" + encode_var_signed_long(0)),  # non-canonical VAR_LONG
        (q.decode_timestamps_row, _prefix(b"\x01\x02\x02") + b"\x01\x02\x02"),  # bad flag
        (q.decode_timestamps_row, _prefix(b"\x01\x02") + b"\x01\x02"),  # no flag
        (q.decode_timestamps_row, _prefix(encode_var_long(256) + b"\x00\x00") + encode_var_long(256) + b"\x00\x00"),
        (q.decode_timestamps_column, b""),
        (q.decode_timestamps_column, b"\x05\x05"),
        (q.decode_progress_value, b""),
        (q.decode_progress_value, encode_var_long(-2)),
        (q.decode_progress_row, _prefix(encode_var_signed_long(256) + b"\x00") + encode_var_signed_long(256) + b"\x00"),
    ],
)
def test_decoders_reject(decoder, data):
    with pytest.raises(CorruptQueueDataError):
        decoder(data)


@pytest.mark.parametrize(
    "call",
    [
        lambda: q.non_dedicated_row(-1, 0, True),
        lambda: q.non_dedicated_row(0, 256, True),
        lambda: q.dedicated_row(5, 0, True, 64),
        lambda: q.cells_column(50_000, 0),
        lambda: q.cells_column(0, -65),
        lambda: q.timestamps_row(0, -1, True),
        lambda: q.timestamps_row(0, 0, 1),
        lambda: q.progress_row(-2, True),
        lambda: q.encode_progress_value(-2),
        lambda: q.decode_cells_row("text"),
    ],
)
def test_encoders_validate(call):
    with pytest.raises(InvalidInputError):
        call()


def test_cells_column_fast_path_agrees_with_the_checked_decoder():
    """Valid columns of every width and single-byte mutations of them: the fast path returns what the
    checked decoder returns, or defers to it (same CorruptQueueDataError)."""
    rng = random.Random(3)
    moduli = [0, 1, 127, 128, 16_383, 16_384, 49_999] + [rng.randrange(50_000) for _ in range(50)]
    indices = [-64, -1, 0, 1, 63, 64, 8191, 99_999] + [rng.randrange(-64, 100_000) for _ in range(50)]
    valid = [q.cells_column(m, i) for m in moduli for i in indices]

    def outcome(fn, data):
        try:
            return fn(data)
        except CorruptQueueDataError:
            return "corrupt"

    cases = list(valid) + [b"", b"\x80", b"\x00", b"\x00\x7f"]
    for _ in range(4000):
        data = bytearray(rng.choice(valid))
        data[rng.randrange(len(data))] = rng.choice([0x00, 0x3F, 0x40, 0x7F, 0x80, 0xBF, 0xC0, 0xDF, 0xE0, 0xFF])
        if rng.random() < 0.2:
            data = data[:-1] if rng.random() < 0.5 else data + b"\x80"
        cases.append(bytes(data))
    for data in cases:
        assert outcome(q.decode_cells_column, data) == outcome(q._decode_cells_column_checked, data), data.hex()
    assert all(q.decode_cells_column(c) == q._decode_cells_column_checked(c) for c in valid)
