"""Backends: one per kind of control plane, behind the Backend protocol of base.py."""
