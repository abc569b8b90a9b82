# Joins the cluster local-limits migration with the lifecycle migrations written beside it.
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("broker", "0009_lifecycle_choices"),
        ("broker", "0010_cluster_local_limits"),
    ]

    operations: list = []
