#!/usr/bin/env python3
"""Latency of small NCCL all-reduces, the shape that dominates a TP-8 verify step.

Launched by torchrun, one process per GPU. For each size it runs warm-up
all-reduces, then times every all-reduce on its own with CUDA events and prints
one line per size that smpatch's metric regexes read:

    allreduce elems=21504 bytes=43008 mode=graph world=2 median_us=9.81 p99_us=12.40 mean_us=9.95 iters=2000

--mode eager (or sglang's --disable-cuda-graph) calls dist.all_reduce directly;
--mode graph, the default, captures one
all-reduce in a CUDA graph and times each replay, the way sglang's decode runs
under CUDA graphs. The sum is checked once per size so a broken configuration
cannot report a latency.
"""

import argparse
import os
import statistics
import sys

# Multicast (NVLS) stays off in every process, whatever launched it.
for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="7168,21504,2097152",
                   help="comma-separated element counts (bf16): one token's hidden state, ~42 KB, 4 MB")
    p.add_argument("--mode", choices=["eager", "graph"], default="graph")
    p.add_argument("--disable-cuda-graph", dest="mode", action="store_const", const="eager",
                   help="time eager all-reduces (sglang's flag of the same name)")
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--iters", type=int, default=2000)
    return p.parse_args()


def percentile(sorted_vals, q):
    if not sorted_vals:
        return float("nan")
    k = max(0, min(len(sorted_vals) - 1, int(round(q / 100.0 * (len(sorted_vals) - 1)))))
    return sorted_vals[k]


def time_one_size(n, mode, warmup, iters, rank, world):
    dev = torch.device("cuda", torch.cuda.current_device())
    x = torch.ones(n, dtype=torch.bfloat16, device=dev)

    # Correctness first: a sum of ones over the world must be the world size.
    y = x.clone()
    dist.all_reduce(y)
    torch.cuda.synchronize()
    if not torch.all(y == float(world)).item():
        raise SystemExit(f"allreduce elems={n}: wrong sum on rank {rank}")

    if mode == "graph":
        buf = x.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                dist.all_reduce(buf)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            dist.all_reduce(buf)

        def step():
            graph.replay()
    else:
        buf = x.clone()

        def step():
            dist.all_reduce(buf)

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    dist.barrier()

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        starts[i].record()
        step()
        ends[i].record()
    torch.cuda.synchronize()
    us = sorted(s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends))
    return statistics.median(us), percentile(us, 99), statistics.fmean(us)


def main():
    args = parse_args()
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if not torch.cuda.is_available():
        print("allreduce: no CUDA device visible", file=sys.stderr)
        return 2
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    try:
        for n in (int(s) for s in args.sizes.split(",") if s):
            med, p99, mean = time_one_size(n, args.mode, args.warmup, args.iters, rank, world)
            # Report the slowest rank's view: an all-reduce is as slow as its slowest member.
            t = torch.tensor([med, p99, mean], dtype=torch.float64, device="cuda")
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            med, p99, mean = t.tolist()
            if rank == 0:
                print(f"allreduce elems={n} bytes={n * 2} mode={args.mode} world={world} "
                      f"median_us={med:.2f} p99_us={p99:.2f} mean_us={mean:.2f} iters={args.iters}",
                      flush=True)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
