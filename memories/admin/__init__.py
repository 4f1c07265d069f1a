"""The Django admin: curating memories through the service layer, and read-only views of the audit trail.

Every write goes through ``memories.services`` with the logged-in user as the actor
(``user:<username>``, interface ``admin``): forms call their service from ``clean()``
(``memories.admin.forms``), and actions call one service per memory inside one
transaction, so a refused memory leaves the whole batch unchanged (``memories.admin.actions``).

Django's autodiscovery imports this package; importing the modules below registers their admins.
"""

from memories.admin import audit_trail, conflict_queue, keys, memory, routing  # noqa: F401
