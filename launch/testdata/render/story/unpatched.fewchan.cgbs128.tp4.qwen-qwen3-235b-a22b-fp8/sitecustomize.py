# Cell unpatched.fewchan.cgbs128.tp4.qwen-qwen3-235b-a22b-fp8, written by smpatch matrix render: sets the cell's NCCL
# variables when Python starts, before anything imports torch or NCCL.
# run.sh puts this directory first on PYTHONPATH.
import os
os.environ["NCCL_ALGO"] = "Ring"
os.environ["NCCL_BUFFSIZE"] = "131072"
os.environ["NCCL_MAX_NCHANNELS"] = "2"
os.environ["NCCL_MIN_NCHANNELS"] = "1"
os.environ["NCCL_NTHREADS"] = "64"
os.environ["NCCL_P2P_LEVEL"] = "SYS"
os.environ["NCCL_PROTO"] = "LL"
