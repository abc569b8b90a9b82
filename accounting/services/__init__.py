"""Writes of the accounting app: ledger ingest, bill import, rates, reconciliation."""
