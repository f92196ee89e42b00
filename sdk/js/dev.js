// taskhost's JavaScript SDK, the entry of a build for `taskhost dev` (`TASKHOST_DEV=1 sh build.sh`):
// the handler (../app.js) with the SDK's part that runs the source dev lends a run of task 0
// (taskhost_live.js), which a worker's build (app.js alone) leaves out, as it leaves out the
// wasi:filesystem functions that part calls: each function a world imports costs every run.
import { readLentSource } from "./taskhost.js";
import { liveHandle } from "./taskhost_live.js";

export { handle } from "../app.js";

readLentSource(liveHandle);
