"""Goldmane's flow API (package ``goldmane``), generated from ``api.proto`` here by ``make proto``.

The .proto keeps upstream's wire format (see its header), so these modules serve and call
upstream clients and servers alike.
"""
