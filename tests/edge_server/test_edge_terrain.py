"""A site's terrain model on the live server (camera.terrain in the site YAML): a bad model is
refused at start in one line, a good one reaches every stream's pipeline through the one builder."""

from __future__ import annotations

import numpy as np
import pytest
import rasterio
from affine import Affine

from edge_client.synthetic import BrightBlobDetector, SceneRoadSegmenter
from edge_server.app import make_pipeline_factory
from edge_server.settings import ServerSettings, SettingsError

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)


def site_yaml(tmp_path, dem: str) -> ServerSettings:
    path = tmp_path / "site.yaml"
    path.write_text(
        f"camera:\n  name: dji_mavic_3\n  terrain:\n    dem: {dem}\n    takeoff: [47.3769, 8.5417]\n"
    )
    return ServerSettings(data_dir=tmp_path / "data", pipeline_config=path)


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "no such file"), (b"not a raster", "site.tif"), ("no-crs", "has no CRS")],
)
def test_a_bad_terrain_model_is_refused_at_start(tmp_path, content, message) -> None:
    dem = tmp_path / "site.tif"
    if content == "no-crs":
        with rasterio.open(dem, "w", driver="GTiff", height=4, width=4, count=1, dtype="float32",
                           transform=Affine(1, 0, 0, 0, -1, 4)) as ds:  # fmt: skip
            ds.write(np.zeros((1, 4, 4), np.float32))
    elif content is not None:
        dem.write_bytes(content)
    with pytest.raises(SettingsError, match=message) as info:
        make_pipeline_factory(site_yaml(tmp_path, str(dem)))
    assert "\n" not in str(info.value)


def test_every_stream_gets_the_sites_terrain(tmp_path) -> None:
    dem = tmp_path / "site.tif"
    with rasterio.open(
        dem, "w", driver="GTiff", height=40, width=40, count=1, dtype="float32", crs="EPSG:4326+5773",
        transform=Affine(0.001, 0, 8.52, 0, -0.001, 47.39),
    ) as ds:  # fmt: skip
        ds.write(np.full((1, 40, 40), 410.0, np.float32))
    factory = make_pipeline_factory(
        site_yaml(tmp_path, str(dem)),
        detector_factory=BrightBlobDetector,
        segmenter_factory=SceneRoadSegmenter,
    )
    pipeline = factory()
    assert pipeline.ground.terrain is not None
    assert pipeline.ground.terrain.settings.takeoff == (47.3769, 8.5417)
