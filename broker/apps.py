from django.apps import AppConfig


class BrokerConfig(AppConfig):
    name = "broker"
    verbose_name = "GPU broker"

    def ready(self) -> None:
        # the settings are read once, here, and handed to the simulator (it reads none)
        from broker.backends.registry import configure_simulated_fleet

        configure_simulated_fleet()
