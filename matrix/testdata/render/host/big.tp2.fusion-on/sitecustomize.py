# Cell big.tp2.fusion-on, written by smpatch matrix render: sets the cell's NCCL
# variables when Python starts, before anything imports torch or NCCL.
# run.sh puts this directory first on PYTHONPATH.
import os
# (this cell sets no NCCL variables)
