"""The pure OpenHands-parity view engine: no SQL here, and no view rule anywhere else."""

from viewstore.domain.view.branch import active_branch
from viewstore.domain.view.condense import condense, forget, summary_position
from viewstore.domain.view.enforcement import EnforcementRound, enforce_properties
from viewstore.domain.view.incremental import IndexDelta, IndexTracker, TrackerState, full_indices
from viewstore.domain.view.indices import ManipulationIndices
from viewstore.domain.view.item import ViewItem
from viewstore.domain.view.view import View

__all__ = [
    "EnforcementRound",
    "IndexDelta",
    "IndexTracker",
    "ManipulationIndices",
    "TrackerState",
    "View",
    "ViewItem",
    "active_branch",
    "condense",
    "enforce_properties",
    "forget",
    "full_indices",
    "summary_position",
]
