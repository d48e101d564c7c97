"""The read-only web dashboard, served by ``serve --api-listen`` under ``/ui``
(``automation.ui.pages``; its sessions and CSRF tokens: ``automation.ui.sessions``)."""
