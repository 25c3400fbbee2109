# Dask Gateway on Kubernetes for test/managers (TestDaskGateway): one file for both processes,
# as a Helm release configures them — the API server (`dask-gateway-server -f`, KubeBackend: it
# creates a DaskCluster per cluster a user asks for) and the controller (`dask-gateway-server
# kube-controller -f`: it makes each DaskCluster's Secret, scheduler Pod, Service and workers).
# Both run outside the cluster and fall back to $KUBECONFIG. Their listen addresses come from
# the command line (--DaskGateway.address, --KubeController.address).
from dask_gateway_server.options import Options, String

# The instance names the release: the label gateway.dask.org/instance on everything it makes,
# and the controller's label selector.
instance = "dask-gateway"

c.DaskGateway.backend_class = "dask_gateway_server.backends.kubernetes.KubeBackend"
# Basic auth, any password: the test is the user.
c.DaskGateway.authenticator_class = "dask_gateway_server.auth.SimpleAuthenticator"
c.KubeBackend.gateway_instance = instance
c.KubeController.gateway_instance = instance
# Where the scheduler and workers would reach the API server (in their environment).
c.KubeController.api_url = "http://api-dask-gateway.dask-gateway:8000/api"

c.KubeClusterConfig.image = "ghcr.io/dask/dask-gateway:2026.3.0"
# A user option picks the namespace of their cluster (a documented cluster option), so that one
# gateway makes the same cluster in the namespace podpatch serves and in its control namespace.
c.Backend.cluster_options = Options(
    String("namespace", default="default", label="Namespace"),
    handler=lambda options: {"namespace": options.namespace},
)
# No kube-scheduler places these Pods: the test binds the scheduler Pod, as a scheduler of this
# name would (a scheduler decides the node, not podpatch or the gateway; the workers stay Pending).
c.KubeClusterConfig.scheduler_extra_pod_config = {"schedulerName": "podpatch-managers-gateway"}
c.KubeClusterConfig.worker_extra_pod_config = {"schedulerName": "podpatch-managers-gateway"}
