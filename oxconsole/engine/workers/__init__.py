"""Where a run's shards run: in the coordinator's loop, in worker processes, or in Ray actors.

`shardset` says what the coordinator asks of its shards and runs one in its own loop; `split` cuts
the workload and each live change into shards' parts; `pool`, `worker` and `messages` are the worker
processes; `raypool`, `raychannel`, `rayfiles` and `raytoken` the Ray actors; `lost` what a run
says of a shard it lost.
"""
