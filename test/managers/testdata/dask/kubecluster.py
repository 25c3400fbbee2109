"""Creates a Dask cluster the way the founding dask-kubernetes issue's users do.

Usage: python kubecluster.py NAMESPACE

KubeCluster creates the DaskCluster resource and then waits for the scheduler to run; with
no kubelet in the test control plane it never does, so the test kills this process once the
operator has made the cluster's objects. shutdown_on_close=False: nothing is deleted on exit.
"""
import sys

from dask_kubernetes.operator import KubeCluster

KubeCluster(
    name="simple",
    namespace=sys.argv[1],
    n_workers=2,
    resources={"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}},
    shutdown_on_close=False,
    resource_timeout=600,
)
