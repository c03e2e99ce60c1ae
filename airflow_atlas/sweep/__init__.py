"""Targeted sweep: the sweep queue (writer, reader, cleaner), shard progress, sweep timestamps and the sweepers."""
