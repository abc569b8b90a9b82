from decimal import Decimal

import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("tenancy", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="tenant",
            name="cloud_budget_month",
            field=models.DecimalField(
                blank=True, decimal_places=2, max_digits=14, null=True,
                help_text="Cloud spend allowed per month, in the bills' currency; empty: no budget set",
                validators=[django.core.validators.MinValueValidator(Decimal("0"))]),
        ),
    ]
