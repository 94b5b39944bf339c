#!/usr/bin/env python3
"""Generates a realistic mix of Kubernetes/Istio manifests for the audit
benchmark (docs/BENCHMARKS.md, "8. Audit"): N objects of about 2 KB each,
spread over files of 100 objects, as `helm template` output would be.

Mix per service (10 objects): Deployment (full pod spec, ~2.5 KB), Service,
HPA v2, DestinationRule, VirtualService, Sidecar, ServiceAccount,
ConfigMap (skipped kind, ~2 KB of data), PodDisruptionBudget (skipped),
NetworkPolicy (skipped). One namespace per 50 services, injected.

usage: benches/audit_gen.py OUT_DIR [N_OBJECTS]   (default 10000)
Deterministic: the same N gives the same files.
"""
import os
import sys

DEPLOY = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {ns}
  labels:
    app.kubernetes.io/name: {name}
    app.kubernetes.io/instance: shop
    app.kubernetes.io/version: "1.{i}.0"
    app.kubernetes.io/managed-by: Helm
    helm.sh/chart: shop-1.{i}.0
spec:
  replicas: {replicas}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      app: {name}
  strategy:
    type: RollingUpdate
    rollingUpdate: {{maxSurge: 25%, maxUnavailable: 0}}
  template:
    metadata:
      labels:
        app: {name}
        version: v1
      annotations:
        sidecar.istio.io/proxyCPU: 100m
        sidecar.istio.io/proxyCPULimit: {proxy_limit}
        proxy.istio.io/config: |
          concurrency: 2
        prometheus.io/scrape: "true"
        prometheus.io/port: "9090"
    spec:
      serviceAccountName: {name}
      terminationGracePeriodSeconds: 30
      securityContext: {{runAsNonRoot: true, runAsUser: 10001, fsGroup: 10001}}
      containers:
      - name: {name}
        image: registry.example.com/shop/{name}:1.{i}.0
        imagePullPolicy: IfNotPresent
        args: ["--port", "8080", "--workers", "{workers}"]
        ports:
        - {{name: http, containerPort: 8080, protocol: TCP}}
        - {{name: metrics, containerPort: 9090, protocol: TCP}}
        env:
        - {{name: LOG_LEVEL, value: info}}
        - {{name: DB_HOST, value: db.{ns}.svc.cluster.local}}
        - {{name: CACHE_TTL, value: "30s"}}
        - name: POD_NAME
          valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}
        resources:
          requests: {{cpu: 500m, memory: 512Mi}}
          limits: {{cpu: "1", memory: 1Gi}}
        readinessProbe:
          httpGet: {{path: /ready, port: http}}
          periodSeconds: 5
          failureThreshold: 3
        livenessProbe:
          httpGet: {{path: /healthz, port: http}}
          initialDelaySeconds: 10
          periodSeconds: 10
        volumeMounts:
        - {{name: config, mountPath: /etc/{name}, readOnly: true}}
      volumes:
      - name: config
        configMap: {{name: {name}-config}}
"""

SERVICE = """apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: {ns}
  labels: {{app: {name}}}
spec:
  selector: {{app: {name}}}
  ports:
  - {{name: http, port: 80, targetPort: http}}
  - {{name: metrics, port: 9090, targetPort: metrics}}
"""

HPA = """apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {name}
  namespace: {ns}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {name}}}
  minReplicas: {replicas}
  maxReplicas: {maxr}
  metrics:
  - type: {metric_type}
    {metric_key}:
      name: cpu
{container}      target: {{type: Utilization, averageUtilization: 70}}
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 300
      policies: [{{type: Percent, value: 10, periodSeconds: 60}}]
"""

DR = """apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: {name}
  namespace: {ns}
spec:
  host: {name}
  trafficPolicy:
    connectionPool:
      tcp: {{maxConnections: 1000}}
      http: {{http2MaxRequests: {pool}, http1MaxPendingRequests: 100, maxRetries: {max_retries}}}
    outlierDetection:
      consecutive5xxErrors: 5
      interval: 10s
      baseEjectionTime: 30s
      maxEjectionPercent: 50
"""

VS = """apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: {name}
  namespace: {ns}
spec:
  hosts: [{name}]
  http:
  - name: primary
    route:
    - destination: {{host: {name}, subset: v1}}
      weight: 100
    timeout: 5s
    retries: {{attempts: {attempts}, perTryTimeout: 2s, retryOn: "5xx,connect-failure"}}
"""

SIDECAR = """apiVersion: networking.istio.io/v1
kind: Sidecar
metadata:
  name: {name}
  namespace: {ns}
spec:
  workloadSelector:
    labels: {{app: {name}}}
  inboundConnectionPool:
    http: {{http2MaxRequests: {inbound}}}
  egress:
  - hosts: ["./*", "istio-system/*"]
"""

SA = """apiVersion: v1
kind: ServiceAccount
metadata:
  name: {name}
  namespace: {ns}
  labels: {{app: {name}}}
"""

CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}-config
  namespace: {ns}
data:
  config.yaml: |
{lines}"""

PDB = """apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {name}
  namespace: {ns}
spec:
  minAvailable: 1
  selector:
    matchLabels: {{app: {name}}}
"""

NETPOL = """apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {name}
  namespace: {ns}
spec:
  podSelector:
    matchLabels: {{app: {name}}}
  ingress:
  - from:
    - namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: istio-system}}}}
"""

NAMESPACE = """apiVersion: v1
kind: Namespace
metadata:
  name: {ns}
  labels: {{istio-injection: enabled}}
"""


def service_objects(i):
    name = f"svc-{i:05d}"
    ns = f"team-{i // 50:03d}"
    container = "" if i % 2 else f"      container: {name}\n"
    v = dict(
        name=name, ns=ns, i=i % 90,
        replicas=2 + i % 5, maxr=10 + i % 30,
        proxy_limit=["100m", "500m", "2000m"][i % 3],
        workers=[8, 16, 40][i % 3],
        metric_type="Resource" if i % 2 else "ContainerResource",
        metric_key="resource" if i % 2 else "containerResource",
        container=container,
        pool=[1, 64, 1000][i % 3], max_retries=[0, 10, 20][i % 3],
        attempts=[0, 2, 3][i % 3], inbound=[10, 100, 1000][i % 3],
        lines="".join(f"    key_{k:03d}: value for {name} number {k} with some padding text\n" for k in range(24)),
    )
    return [with_metadata(t.format(**v), name, ns) for t in (DEPLOY, SERVICE, HPA, DR, VS, SIDECAR, SA, CONFIGMAP, PDB, NETPOL)]


def with_metadata(text, name, ns):
    """Adds what `kubectl apply`/Helm put on every object: release labels
    and annotations, and last-applied-configuration (about 1.3 KB)."""
    applied = ('{"apiVersion":"v1","kind":"Object","metadata":{"name":"%s","namespace":"%s",'
               '"labels":{"app.kubernetes.io/part-of":"shop","team":"%s"}},"spec":{%s}}'
               % (name, ns, ns, ",".join('"field%02d":"value %02d of %s"' % (k, k, name) for k in range(24))))
    block = (f"  namespace: {ns}\n  annotations:\n"
             f"    meta.helm.sh/release-name: shop\n    meta.helm.sh/release-namespace: {ns}\n"
             f"    checksum/config: 9f2c1a7e4b3d5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4\n"
             f"    kubectl.kubernetes.io/last-applied-configuration: '{applied}'\n")
    return text.replace(f"  namespace: {ns}\n", block, 1)


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    os.makedirs(out, exist_ok=True)
    objects = []
    for i in range((n + 9) // 10):
        if i % 50 == 0:
            objects.append(NAMESPACE.format(ns=f"team-{i // 50:03d}"))
        objects.extend(service_objects(i))
    objects = objects[:n]
    size = 0
    for f in range(0, len(objects), 100):
        text = "---\n".join(objects[f:f + 100])
        size += len(text)
        with open(os.path.join(out, f"manifests-{f // 100:04d}.yaml"), "w") as fh:
            fh.write(text)
    print(f"{len(objects)} objects, {size} bytes ({size / len(objects):.0f} B/object) in {out}")


main()
