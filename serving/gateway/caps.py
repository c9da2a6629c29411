"""What a model version can do, read from its signatures in TF Serving's metadata: the
endpoints, the pipeline and the status poll all ask it, so it sits below them."""

from __future__ import annotations

from dataclasses import dataclass

from tokenpulse.tfserving.signature import CONTINUE_SIGNATURE_NAME, RESUME_INPUTS, SIGNATURE_NAME

STOP_INPUT = "stop"  # a `stop` input on serving_default: the model itself stops at a sequence


@dataclass(frozen=True)
class VersionCaps:
    """What one version's signatures let it do."""

    streams: bool  # it exports `continue`
    stop_in_graph: bool  # its serving_default takes the stop sequences
    resumes: bool = False  # its `continue` takes the ids of the tokens generated so far

    @classmethod
    def from_signatures(cls, signatures: dict[str, set[str]]) -> VersionCaps:
        """Read from the signature names and their inputs."""
        return cls(
            streams=CONTINUE_SIGNATURE_NAME in signatures,
            stop_in_graph=STOP_INPUT in signatures.get(SIGNATURE_NAME, set()),
            resumes=RESUME_INPUTS[0] in signatures.get(CONTINUE_SIGNATURE_NAME, set()),
        )


# what a version whose server answers no metadata is taken to do: only what every version does
UNKNOWN = VersionCaps(streams=True, stop_in_graph=False)
