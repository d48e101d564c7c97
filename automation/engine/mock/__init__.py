"""The mock engine: stack programs run under the Pulumi SDK's mock settings, no CLI.

``program`` runs a program and returns what it registered (``model``), through our
in-process ``monitor``; ``providers`` answers as the provider plugins would; ``diff`` decides
each resource's step against the recorded state, with the providers' force-new table
(``force_new``); ``runner`` is the ``StackRunner`` that keeps that state. Nothing here
imports Pulumi until a program runs."""
