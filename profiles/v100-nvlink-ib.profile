# V100 + NVLink + 100 Gb/s InfiniBand: the setting of the published
# system (PrimePar, ASPLOS 2024: 32 V100 GPUs, 4 per node, NVLink inside a
# node, InfiniBand across nodes).
#
# Sources. Device figures are the NVIDIA Tesla V100 datasheet (SXM2, 32 GB):
# 125 TFLOP/s tensor (fp16), 31.4 TFLOP/s fp16 without tensor cores
# (twice the 15.7 TFLOP/s fp32), 900 GB/s HBM2, 32 GiB, NVLink 300 GB/s
# per GPU (6 NVLink2 links x 25 GB/s per direction). InfiniBand EDR is
# 100 Gb/s = 12.5 GB/s per direction (line rate).
# Everything marked "nominal" is an estimate, not a measurement: the GEMM
# efficiency curve, launch overhead, all latencies (alpha), and effective
# bandwidths (beta) taken as a fraction of the line rates above.
# Collective betas are ring "bus bandwidths": time = alpha + V / beta with
# V = 2(g-1)/g n for all-reduce and (g-1)/g n for reduce-scatter and
# all-gather (docs/cost-model.md).

name v100-nvlink-ib
description NVIDIA V100 SXM2 32GB, 4 per node over NVLink, 100 Gb/s EDR InfiniBand between nodes
devices_per_node 4
peak_tflops 125           # datasheet, tensor cores, fp16
vector_tflops 31.4        # datasheet, fp16 without tensor cores
mem_bandwidth_GBps 900    # datasheet, HBM2
mem_capacity_GB 34.36     # datasheet: 32 GiB
gemm_eff_max 0.80         # nominal: large fp16 GEMMs reach ~100 TFLOP/s
gemm_half_dim 128         # nominal: efficiency halves at a 128-wide GEMM
kernel_overhead_us 5      # nominal: launch + tail of one kernel

#    class kind            alpha_us       beta_GBps
# intra: each pair of the 4 GPUs has 2 NVLink2 links = 50 GB/s per
# direction (datasheet); p2p at 90% of it (nominal); collectives use all 6
# links, ~130 GB/s bus bandwidth (nominal, the order nccl-tests reports on
# NVLink V100 systems).
link intra p2p            alpha_us 8        beta_GBps 45
link intra allreduce      alpha_us 12       beta_GBps 130
link intra reduce_scatter alpha_us 10       beta_GBps 130
link intra allgather      alpha_us 10       beta_GBps 130
# inter: one EDR port, 12.5 GB/s line rate; ~88% of it (nominal).
link inter p2p            alpha_us 10       beta_GBps 11
link inter allreduce      alpha_us 30       beta_GBps 10
link inter reduce_scatter alpha_us 20       beta_GBps 10
link inter allgather      alpha_us 20       beta_GBps 10
