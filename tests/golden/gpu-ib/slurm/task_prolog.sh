#!/bin/sh
# slurmk8s TaskProlog: NCCL over the RDMA devices on the RDMA pools' nodes.
case "$SLURMD_NODENAME" in
  a100-*|h100-*)
    echo 'export NCCL_IB_DISABLE=0'
    echo 'export NCCL_SOCKET_IFNAME=eth0'
    ;;
esac
