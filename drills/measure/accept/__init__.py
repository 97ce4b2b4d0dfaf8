"""Parsers of the tools a pre-expansion acceptance runs on a new node, one small module per tool.

Each reads the tool's own text output (as printed in a pod's log) into frozen values; none judges.
`ToolOutputError` (drills.core.errors) says a text is not that tool's output, or stops before its
figures, so an unreadable log is a no-go with that reason, never a pass.

    nvidia_smi   `nvidia-smi -L` (GPUs visible) and the `nvidia-smi` table (driver, CUDA, temperatures)
    dcgmi        `dcgmi diag -r N` (DCGM 3 and 4 table shapes)
    gpu_burn     gpu-burn's progress lines (Gflop/s, errors, temperatures per GPU)
    nccl_tests   nccl-tests `*_perf` tables (bus bandwidth, #wrong, failures, NCCL transport)
    perftest     perftest `ib_write_bw` / `ib_read_bw` (device, link type, MTU, bandwidth)
    ibstat       `ibstat` (CAs, port state, rate, link layer)
"""
