from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('broker', '0007_workload_outcome'),
    ]

    operations = [
        migrations.AddField(
            model_name='workload',
            name='origin',
            field=models.CharField(choices=[('broker', 'Broker'), ('multikueue', 'MultiKueue')], default='broker', max_length=20),
        ),
        migrations.AddField(
            model_name='workload',
            name='external_ref',
            field=models.CharField(blank=True, help_text='namespace/name of the object another control plane owns', max_length=300),
        ),
        migrations.AddField(
            model_name='workload',
            name='nominated_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
