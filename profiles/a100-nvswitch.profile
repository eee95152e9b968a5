# A100 + NVSwitch, 8 per node (DGX A100 layout), 200 Gb/s HDR InfiniBand
# per GPU between nodes.
#
# Sources. NVIDIA A100 datasheet (SXM4, 80 GB): 312 TFLOP/s fp16/bf16
# tensor (dense; 624 is with sparsity), 2039 GB/s HBM2e, 80 GB; NVLink
# 600 GB/s per GPU (300 GB/s per direction) through NVSwitch. A100
# whitepaper: 78 TFLOP/s fp16 without tensor cores. DGX A100 datasheet:
# 8 single-port ConnectX-6 200 Gb/s HDR InfiniBand (25 GB/s per direction)
# for compute traffic, one per GPU.
# "nominal" marks estimates: GEMM efficiency, overheads, all alphas, and
# betas taken as a fraction of the line rates. Collective betas are ring
# bus bandwidths (docs/cost-model.md).

name a100-nvswitch
description NVIDIA A100 SXM4 80GB, 8 per node over NVSwitch, 200 Gb/s HDR InfiniBand per GPU
devices_per_node 8
peak_tflops 312           # datasheet, tensor cores, dense fp16/bf16
vector_tflops 78          # whitepaper, fp16 without tensor cores
mem_bandwidth_GBps 2039   # datasheet, HBM2e (80 GB SXM)
mem_capacity_GB 85.9      # datasheet: 80 GiB
gemm_eff_max 0.80         # nominal: large GEMMs reach ~250 TFLOP/s
gemm_half_dim 192         # nominal
kernel_overhead_us 4      # nominal

#    class kind            alpha_us       beta_GBps
# intra: NVSwitch, 300 GB/s per direction (datasheet); ~80% of it (nominal).
link intra p2p            alpha_us 8        beta_GBps 240
link intra allreduce      alpha_us 15       beta_GBps 230
link intra reduce_scatter alpha_us 12       beta_GBps 230
link intra allgather      alpha_us 12       beta_GBps 230
# inter: one HDR port per GPU, 25 GB/s line rate; ~90% of it (nominal).
link inter p2p            alpha_us 10       beta_GBps 23
link inter allreduce      alpha_us 35       beta_GBps 22
link inter reduce_scatter alpha_us 25       beta_GBps 22
link inter allgather      alpha_us 25       beta_GBps 22
