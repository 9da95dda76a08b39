"""batch.discovery: finding flights in folders, globs and list files, and refusing clearly."""

from __future__ import annotations

from pathlib import Path

import pytest
from batch_helpers import touch

from batch.commit import RECORD_NAME
from batch.discovery import discover_flights
from batch.errors import BatchError


def _layout(root: Path) -> None:
    """A DJI card (flat videos + .SRT), a simulator folder (video + masks), a MOT frame folder."""
    touch(root / "card" / "DJI_0001.MP4")
    touch(root / "card" / "DJI_0001.SRT")
    touch(root / "card" / "DJI_0002.MP4")
    touch(root / "sim" / "video.mp4")
    touch(root / "sim" / "video.SRT")
    touch(root / "sim" / "road_mask" / "000001.png")  # a flight's own folder: not a flight
    touch(root / "mot" / "seqinfo.ini", "[Sequence]\nname=mot\nimDir=img1\nframeRate=30\nimExt=.jpg\n")
    touch(root / "mot" / "img1" / "000001.jpg")
    touch(root / "notes" / "readme.md")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            ["."],
            {
                "card/DJI_0001": ("card/DJI_0001.MP4", "card/DJI_0001.SRT"),
                "card/DJI_0002": ("card/DJI_0002.MP4", None),
                "mot": ("mot", None),
                "sim/video": ("sim/video.mp4", "sim/video.SRT"),
            },
        ),
        (
            ["card/*.MP4"],
            {"DJI_0001": ("card/DJI_0001.MP4", "card/DJI_0001.SRT"), "DJI_0002": ("card/DJI_0002.MP4", None)},
        ),
        (["card/DJI_0002.MP4"], {"DJI_0002": ("card/DJI_0002.MP4", None)}),
        (["mot"], {"mot": ("mot", None)}),
        (  # one flight named twice (names are relative to the folder given): processed once
            ["card", "card/DJI_0001.MP4"],
            {
                "DJI_0001": ("card/DJI_0001.MP4", "card/DJI_0001.SRT"),
                "DJI_0002": ("card/DJI_0002.MP4", None),
            },
        ),
    ],
    ids=["folder-of-flights", "glob", "one-video", "frame-folder", "named-twice"],
)
def test_discover_flights(tmp_path, monkeypatch, given, expected) -> None:
    _layout(tmp_path)
    monkeypatch.chdir(tmp_path)
    found = {f.name: f for f in discover_flights(given)}
    assert set(found) == set(expected)
    for name, (video, srt) in expected.items():
        assert found[name].video.resolve() == (tmp_path / video).resolve()
        assert (found[name].srt.resolve() if found[name].srt else None) == (
            (tmp_path / srt).resolve() if srt else None
        )


def test_outputs_inside_the_input_folder_are_not_flights(tmp_path) -> None:
    """``airpatrol process /archive --out /archive/results``, run twice: the first run's annotated
    videos are not flights of the second (nor of a batch over an older output folder)."""
    _layout(tmp_path)
    touch(tmp_path / "results" / ".batch.lock")
    touch(tmp_path / "results" / "card" / "DJI_0001" / "annotated.mp4")
    touch(tmp_path / "older" / "DJI_0001" / RECORD_NAME, "{}")
    touch(tmp_path / "older" / "DJI_0001" / "annotated.mp4")
    names = {f.name for f in discover_flights([tmp_path], exclude=tmp_path / "results")}
    assert names == {"card/DJI_0001", "card/DJI_0002", "mot", "sim/video"}
    assert {f.name for f in discover_flights([str(tmp_path / "**" / "*.mp4")])} == {"video"}  # sim/video.mp4


def test_list_file_with_telemetry_and_comments(tmp_path) -> None:
    _layout(tmp_path)
    touch(tmp_path / "logs" / "flight2.csv")
    listing = touch(
        tmp_path / "batch.txt",
        "# tonight's flights\ncard/DJI_0001.MP4\n\ncard/DJI_0002.MP4 logs/flight2.csv  # log from the app\n",
    )
    flights = discover_flights([listing])
    assert [(f.name, f.video.name, f.srt.name if f.srt else None) for f in flights] == [
        ("card/DJI_0001", "DJI_0001.MP4", "DJI_0001.SRT"),
        ("card/DJI_0002", "DJI_0002.MP4", "flight2.csv"),
    ]


@pytest.mark.parametrize(
    ("setup", "given", "message"),
    [
        (lambda r: touch(r / "notes" / "a.md"), ["notes"], "no videos"),
        (lambda r: None, ["missing.mp4"], "not found"),
        (lambda r: None, ["*.mp4"], "matches nothing"),
        (lambda r: touch(r / "l.txt", "gone.mp4\n"), ["l.txt"], "l.txt:1: gone.mp4 not found"),
        (lambda r: touch(r / "l.txt", "a b c\n"), ["l.txt"], "expected 'VIDEO [TELEMETRY]'"),
        (
            lambda r: (touch(r / "a" / "x.mp4"), touch(r / "b" / "x.mp4")),
            ["a/x.mp4", "b/x.mp4"],
            "two flights would write to 'x'",
        ),
    ],
    ids=["no-videos", "missing", "empty-glob", "list-missing", "list-columns", "name-clash"],
)
def test_discover_flights_refuses_clearly(tmp_path, monkeypatch, setup, given, message) -> None:
    monkeypatch.chdir(tmp_path)
    setup(tmp_path)
    with pytest.raises(BatchError, match=message.replace("[", r"\[").replace("]", r"\]")):
        discover_flights(given)
