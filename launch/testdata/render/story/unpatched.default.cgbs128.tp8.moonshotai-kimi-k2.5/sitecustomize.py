# Cell unpatched.default.cgbs128.tp8.moonshotai-kimi-k2.5, written by smpatch matrix render: sets the cell's NCCL
# variables when Python starts, before anything imports torch or NCCL.
# run.sh puts this directory first on PYTHONPATH.
import os
os.environ["NCCL_BUFFSIZE"] = "16777216"
os.environ["NCCL_MAX_NCHANNELS"] = "16"
os.environ["NCCL_MIN_NCHANNELS"] = "16"
os.environ["NCCL_NTHREADS"] = "512"
