"""What an operator sets up before researchers arrive, run in the stack's web container by
`manage.py shell` (piped in): the real Slurm test cluster registered for its REST API with the
token from the environment, tenants with a project each (Slurm account "general"), their
quotas of A100s, the researchers, and a staff user who reads chargeback.

Parameters come as JSON in STACK_SEED: slurm_url, cluster, researchers [[name, password]...],
staff [name, password], tenants, quota."""

import json
import os
from decimal import Decimal

from broker.models import Cluster, Quota
from broker.services.fleet.registration import gpu_classes_from_policy
from portal.tenancy.models import Role
from portal.tenancy.services.tenants import member_ensure, project_ensure, tenant_ensure, user_ensure

seed = json.loads(os.environ["STACK_SEED"])
a100 = {c.slug: c for c in gpu_classes_from_policy()}["a100-80gb"]
Cluster.objects.update_or_create(
    name=seed["cluster"],
    defaults=dict(
        kind="slurm", region="eu-west", location="onprem", price_per_gpu_hour=Decimal("1.0"),
        config={"transport": "rest", "rest_url": seed["slurm_url"], "api_version": "auto", "user_name": "root",
                "partition": "gpu", "account": "general", "gpu_classes": {"a100-80gb": ["a100"]},
                "workdir": "/tmp", "image_pull_s": 0},
        credentials_ref="env:SLURM_JWT",
    ),
)
projects = []
for i in range(seed["tenants"]):
    tenant = tenant_ensure(slug=f"stack-t{i}", name=f"Stack tenant {i}")
    projects.append(project_ensure(tenant=tenant, slug=f"stack-p{i}", name=f"Stack project {i}",
                                   slurm_account="general", k8s_namespace=f"stack-p{i}", cost_centre=f"ST-{i}"))
    Quota.objects.update_or_create(tenant=tenant, gpu_class=a100, defaults={"limit_gpus": seed["quota"]})
out = {}
for n, (name, password) in enumerate(seed["researchers"]):
    project = projects[n % len(projects)]
    member_ensure(user=user_ensure(username=name, password=password), tenant=project.tenant, role=Role.RESEARCHER)
    out[name] = project.id
user_ensure(username=seed["staff"][0], password=seed["staff"][1], is_staff=True)
print("STACK_SEEDED " + json.dumps(out))
