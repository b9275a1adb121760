"""The view properties, in the order enforcement consults them (docs/semantics.md §7)."""

from viewstore.domain.view.properties.base import ViewProperty
from viewstore.domain.view.properties.batch_atomicity import BatchAtomicityProperty
from viewstore.domain.view.properties.observation_uniqueness import ObservationUniquenessProperty
from viewstore.domain.view.properties.tool_call_matching import ToolCallMatchingProperty
from viewstore.domain.view.properties.tool_loop_atomicity import ToolLoopAtomicityProperty

ALL_PROPERTIES: tuple[ViewProperty, ...] = (
    ObservationUniquenessProperty(),
    BatchAtomicityProperty(),
    ToolCallMatchingProperty(),
    ToolLoopAtomicityProperty(),
)

__all__ = [
    "ALL_PROPERTIES",
    "BatchAtomicityProperty",
    "ObservationUniquenessProperty",
    "ToolCallMatchingProperty",
    "ToolLoopAtomicityProperty",
    "ViewProperty",
]
