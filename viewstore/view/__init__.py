"""The pure OpenHands-parity view engine: no SQL here, and no view rule anywhere else."""

from viewstore.view.branch import active_branch
from viewstore.view.condense import condense, forget, summary_position
from viewstore.view.enforcement import EnforcementRound, enforce_properties
from viewstore.view.incremental import IndexDelta, IndexTracker, TrackerState, full_indices
from viewstore.view.indices import ManipulationIndices
from viewstore.view.item import ViewItem
from viewstore.view.view import View

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
