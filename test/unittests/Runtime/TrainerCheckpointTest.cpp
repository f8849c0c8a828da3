//===- TrainerCheckpointTest.cpp - checkpoints, resume, ONNX export -------===//
//
// The training main's checkpoints (the safetensors layout, atomic
// replacement), resume bit for bit, the overlap of steps with and without
// checkpoints in between, Ctrl-C (SIGTERM), refusing another model's
// checkpoint, and the ONNX export. Python checks (the safetensors header,
// onnx.checker) run with /usr/bin/python3 and are skipped where numpy or
// onnx is missing.
//
//===----------------------------------------------------------------------===//

#include "TrainerTestUtil.h"

#include <cstring>
#include <filesystem>
#include <fstream>

using namespace cleave::rt;
using namespace cleave::rt::test;

namespace {

// --keep-last 2: checkpoints at steps 2, 4, 6 and the end, 7, each in
// DIR/step_N, the two latest kept; --resume DIR takes the latest complete
// one (passing over an entry whose commit file is missing, as a crash
// mid-save leaves it) and repeats the uninterrupted run.
TEST_F(Trainer, KeepLastKeepsAHistoryAndResumesTheLatest) {
  namespace fs = std::filesystem;
  writeRegressionData(7);
  const std::string data = "--inputs x.npy --targets t.npy ";
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN,
                data + "--steps 10 --quiet --log-json full.jsonl"),
            0)
      << err;
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, data + "--steps 7 --quiet --save h "
                                          "--save-every 2 --keep-last 2 "
                                          "--log-json half.jsonl"),
            0)
      << err;
  const fs::path h = fs::path(dir) / "h";
  EXPECT_FALSE(fs::exists(h / "step_2"));
  EXPECT_FALSE(fs::exists(h / "step_4"));
  EXPECT_TRUE(fs::exists(h / "step_6" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(h / "step_7" / "model.safetensors"));
  EXPECT_FALSE(fs::exists(h / "model.safetensors"));
  EXPECT_NE(slurp("h/step_7/meta.json").find("\"step\": 7,"),
            std::string::npos);
  fs::create_directories(h / "step_9");
  std::ofstream(h / "step_9" / "meta.json") << "{}";
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN,
                data + "--steps 10 --resume h --log-json half.jsonl"),
            0)
      << err;
  EXPECT_NE(out.find("resumed from h/step_7 at step 7"), std::string::npos)
      << out;
  std::vector<LogLine> full = readLog("full.jsonl"),
                       half = readLog("half.jsonl");
  ASSERT_EQ(full.size(), 10u);
  ASSERT_EQ(half.size(), 10u);
  for (size_t k = 0; k < 10; ++k)
    EXPECT_EQ(half[k].lossText, full[k].lossText) << "step " << k + 1;
  EXPECT_NE(run(CLEAVE_FAKE_TRAIN, data + "--steps 2 --keep-last 2"), 0);
  EXPECT_NE(err.find("error: --keep-last needs --save DIR"), std::string::npos)
      << err;
}

// 10 steps straight against 5 steps (saving every 2), then --resume to 10:
// the same losses as JSON text and the same checkpoint, byte for byte.
TEST_F(Trainer, ResumeRepeatsAnUninterruptedRun) {
  writeRegressionData(7);
  const std::string data = "--inputs x.npy --targets t.npy --shuffle --seed 3 "
                           "--quiet ";
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN,
                data + "--steps 10 --save full --log-json full.jsonl"),
            0)
      << err;
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, data +
                                       "--steps 5 --save half "
                                       "--save-every 2 --log-json half.jsonl"),
            0)
      << err;
  EXPECT_NE(slurp("half/meta.json").find("\"step\": 5,"), std::string::npos);
  // meta.json names each parameter's role.
  EXPECT_NE(slurp("half/meta.json")
                .find("{\"name\": \"optimizer.step\", \"dtype\": \"I64\", "
                      "\"shape\": [], \"model\": false, \"role\": "
                      "\"step_counter\"}"),
            std::string::npos)
      << slurp("half/meta.json");
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, data + "--steps 10 --resume half --save "
                                          "half --log-json half.jsonl"),
            0)
      << err;
  std::vector<LogLine> full = readLog("full.jsonl"),
                       half = readLog("half.jsonl");
  ASSERT_EQ(full.size(), 10u);
  ASSERT_EQ(half.size(), 10u) << "the resumed run appends to the log";
  for (size_t k = 0; k < 10; ++k) {
    EXPECT_EQ(half[k].step, (long long)k + 1);
    EXPECT_EQ(half[k].lossText, full[k].lossText) << "step " << k + 1;
  }
  std::string a = slurp("full/model.safetensors"),
              b = slurp("half/model.safetensors");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(readSafetensors(a).data, readSafetensors(b).data);
  EXPECT_EQ(a, b) << "the metadata has no time stamp: the files are equal";

  // Nothing but the two files is left in the directory (no .tmp).
  std::vector<std::string> files;
  if (DIR *d = ::opendir((dir + "/half").c_str())) {
    while (dirent *e = ::readdir(d))
      if (e->d_name[0] != '.')
        files.push_back(e->d_name);
    ::closedir(d);
  }
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files,
            (std::vector<std::string>{"meta.json", "model.safetensors"}));

  // Resuming at the last step runs nothing; --steps before it is an error;
  // another data order is worth a warning.
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, data + "--steps 10 --resume half"), 0)
      << err;
  EXPECT_EQ(err, "");
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t.npy --shuffle "
                                   "--seed 3 --steps 10 --resume half"),
            0)
      << err;
  EXPECT_NE(out.find("no steps to run: the checkpoint is at step 10"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("trained steps"), std::string::npos) << out;
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t.npy --steps "
                                   "10 --resume half"),
            0)
      << err;
  EXPECT_EQ(err, "warning: checkpoint half was written with data order "
                 "'shuffle seed 3', this run uses 'sequential'\n");
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, data + "--steps 4 --resume half"), 1);
  EXPECT_ERR_HAS("error: --steps 4 is before the checkpoint's step 10");
}

// Waiting for each step before preparing the next (--no-overlap) trains
// the same: the same losses and the same checkpoint, with checkpoints at
// steps 3 and 6 in between (a checkpoint waits for its step first).
TEST_F(Trainer, NoOverlapTrainsTheSame) {
  writeRegressionData(7);
  const std::string data = "--inputs x.npy --targets t.npy --shuffle --seed 5 "
                           "--quiet --steps 8 --save-every 3 ";
  ASSERT_EQ(
      run(CLEAVE_FAKE_TRAIN, data + "--save overlap --log-json overlap.jsonl"),
      0)
      << err;
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN,
                data + "--no-overlap --save sync --log-json sync.jsonl"),
            0)
      << err;
  std::vector<LogLine> a = readLog("overlap.jsonl"), b = readLog("sync.jsonl");
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), 8u);
  for (size_t k = 0; k < 8; ++k) {
    EXPECT_EQ(a[k].step, (long long)k + 1);
    EXPECT_EQ(b[k].step, (long long)k + 1);
    EXPECT_EQ(a[k].lossText, b[k].lossText) << "step " << k + 1;
  }
  EXPECT_EQ(slurp("overlap/model.safetensors"),
            slurp("sync/model.safetensors"));
}

// SIGTERM (as Ctrl-C) ends the run after the step in flight, saves the
// checkpoint of that step and exits with 128 + 15; resuming from it gives
// the checkpoint of a run that was never interrupted.
TEST_F(Trainer, SignalSavesTheLastStepAndResumes) {
  writeRegressionData(7);
  const std::string data = "--inputs x.npy --targets t.npy --shuffle --seed 4 "
                           "--quiet ";
  // Far more steps than run in the second before the signal.
  int status = run("(" CLEAVE_FAKE_TRAIN,
                   data + "--steps 100000000 --save cut & p=$!; sleep 1; "
                          "kill -TERM $p; wait $p)");
  ASSERT_EQ(status, 128 + 15) << err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      err, m,
      std::regex(
          R"(interrupted after step (\d+) \(checkpoint saved to cut\))")))
      << err;
  long long step = std::stoll(m[1].str());
  ASSERT_GT(step, 0);
  EXPECT_NE(
      slurp("cut/meta.json").find("\"step\": " + std::to_string(step) + ","),
      std::string::npos);
  std::string steps = "--steps " + std::to_string(step + 3) + " ";
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, data + steps + "--resume cut --save cut"), 0)
      << err;
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, data + steps + "--save full"), 0) << err;
  EXPECT_EQ(slurp("cut/model.safetensors"), slurp("full/model.safetensors"));
}

// A log that cannot be written (a full disk: /dev/full) stops the run after
// the step in flight with its checkpoint saved, exit 1, as a signal stops
// it; resuming from that checkpoint gives the uninterrupted run.
TEST_F(Trainer, FullDiskForTheLogSavesTheCheckpoint) {
  ASSERT_TRUE(std::filesystem::exists("/dev/full"))
      << "the test needs Linux's /dev/full (writes fail with ENOSPC)";
  writeRegressionData(7);
  const std::string data = "--inputs x.npy --targets t.npy --quiet ";
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN,
                data + "--steps 10 --log-json /dev/full --save cut"),
            1)
      << err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      err, m,
      std::regex(R"(error: cannot write the log /dev/full: No space left on )"
                 R"(device; the run stopped after step (\d+) \(checkpoint )"
                 R"(saved to cut\))")))
      << err;
  long long step = std::stoll(m[1].str());
  ASSERT_GT(step, 0);
  ASSERT_LT(step, 10);
  EXPECT_NE(
      slurp("cut/meta.json").find("\"step\": " + std::to_string(step) + ","),
      std::string::npos);
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, data + "--steps 10 --resume cut --save cut"),
            0)
      << err;
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, data + "--steps 10 --save full"), 0) << err;
  EXPECT_EQ(slurp("cut/model.safetensors"), slurp("full/model.safetensors"));
}

// The safetensors layout: header length, the JSON header with the metadata
// and the tensors in order of decreasing element size, padded to 8 bytes;
// also read by Python (json + numpy) where available.
TEST_F(Trainer, CheckpointFormat) {
  writeRegressionData(8);
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN,
                "--inputs x.npy --targets t.npy --steps 3 --quiet --save ck"),
            0)
      << err;
  std::string bytes = slurp("ck/model.safetensors");
  SafetensorsFile f = readSafetensors(bytes);
  ASSERT_FALSE(f.header.empty());
  EXPECT_EQ((8 + f.headerBytes) % 8, 0u);
  EXPECT_EQ(f.data.size(), 40u); // 8 + 4 * (3 + 1 + 3 + 1)
  EXPECT_EQ(f.header.rfind("{\"__metadata__\":{\"format\":\"cleave\","
                           "\"format_version\":\"1\",\"step\":\"3\",",
                           0),
            0u)
      << f.header;
  for (const char *entry :
       {R"("optimizer.step":{"dtype":"I64","shape":[],"data_offsets":[0,8]})",
        R"("w":{"dtype":"F32","shape":[3],"data_offsets":[8,20]})",
        R"("b":{"dtype":"F32","shape":[],"data_offsets":[20,24]})",
        R"("w.momentum":{"dtype":"F32","shape":[3],"data_offsets":[24,36]})",
        R"("b.momentum":{"dtype":"F32","shape":[],"data_offsets":[36,40]})",
        R"("source_model":"fake_train_model.onnx")",
        R"("data_order":"sequential",)",
        R"("crc32c:w":")", R"("crc32c:optimizer.step":")",
        R"("training_config":"{\"loss\":\"mse\",)"})
    EXPECT_NE(f.header.find(entry), std::string::npos) << entry << "\n"
                                                       << f.header;
  int64_t step;
  std::memcpy(&step, f.data.data(), 8);
  EXPECT_EQ(step, 3);

  ASSERT_TRUE(pythonHas("json, numpy"))
      << CLEAVE_PYTHON3 << " has no numpy, which scripts/setup.sh installs "
      << "(python3-numpy): the Python reading of the checkpoint is unchecked";
  const char *script = R"(import json, struct, sys
import numpy as np
blob = open("ck/model.safetensors", "rb").read()
(n,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8:8 + n])
data = blob[8 + n:]
meta = header.pop("__metadata__")
json.loads(meta["training_config"])
print("step", meta["step"], json.load(open("ck/meta.json"))["step"])
for name, info in sorted(header.items()):
    b, e = info["data_offsets"]
    dtype = {"F32": np.float32, "I64": np.int64}[info["dtype"]]
    a = np.frombuffer(data[b:e], dtype).reshape(info["shape"])
    print(name, " ".join(repr(float(v)) for v in a.ravel()))
)";
  ASSERT_EQ(python(script), 0) << err;
  float w[3];
  std::memcpy(w, f.data.data() + 8, 12);
  EXPECT_NE(out.find("step 3 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("optimizer.step 3.0\n"), std::string::npos) << out;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("w ", 0) == 0) {
      std::istringstream values(line.substr(2));
      for (float v : w) {
        double got;
        values >> got;
        EXPECT_EQ(float(got), v);
      }
    }
}

TEST_F(Trainer, ResumeFromAnotherModel) {
  writeRegressionData(8);
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN,
                "--inputs x.npy --targets t.npy --steps 2 --quiet --save ck"),
            0)
      << err;
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN_OTHER,
                "--inputs x.npy --targets t.npy --steps 4 --resume ck"),
            1);
  EXPECT_ERR_HAS("error: checkpoint ck is from another model: parameter "
                 "'b' is f32 [] in the checkpoint but f32 [1] in this "
                 "program");
  EXPECT_EQ(out.find("step "), std::string::npos) << "no step ran";

  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN_LM, "--steps 4 --resume ck"), 1);
  EXPECT_ERR_HAS("error: checkpoint ck is from another model: parameter "
                 "'table' (f32 [8, 8]) is not in the checkpoint");

  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--steps 4 --resume nowhere"), 1);
  EXPECT_ERR_HAS("error: cannot open the checkpoint nowhere/"
                 "model.safetensors");

  // A step past 2^40 in the metadata (its sample index would overflow) is
  // an error, not a crash: the header rewritten with step 2^62.
  {
    std::string file = slurp("ck/model.safetensors");
    uint64_t length = 0;
    std::memcpy(&length, file.data(), 8);
    std::string header = file.substr(8, length);
    size_t at = header.find("\"step\":\"2\"");
    ASSERT_NE(at, std::string::npos) << header;
    header.replace(at, 10, "\"step\":\"4611686018427387904\"");
    uint64_t newLength = header.size();
    std::filesystem::create_directories(dir + "/big");
    std::ofstream out(dir + "/big/model.safetensors", std::ios::binary);
    ASSERT_TRUE(out);
    out.write(reinterpret_cast<const char *>(&newLength), 8);
    out << header << file.substr(8 + length);
  }
  std::filesystem::copy_file(dir + "/ck/meta.json", dir + "/big/meta.json");
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--steps 4 --resume big"), 1);
  EXPECT_ERR_HAS("is at step 4611686018427387904, past the most this "
                 "trainer counts, 2^40");

  // A truncated checkpoint is an error, not a crash.
  std::string bytes = slurp("ck/model.safetensors");
  {
    std::ofstream cut(dir + "/ck/model.safetensors", std::ios::binary);
    cut.write(bytes.data(), std::streamsize(bytes.size() - 4));
  }
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--steps 4 --resume ck"), 1);
  EXPECT_ERR_HAS("is not a valid safetensors file: tensor 'b.momentum' "
                 "has data_offsets outside the file");
}

// Every tensor's CRC-32C is in the header: one flipped bit of its data is
// an error naming it, not a resume with another value; the data must be
// tiled by the tensors, with nothing after the last.
TEST_F(Trainer, DamagedCheckpointIsRefused) {
  writeRegressionData(8);
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN,
                "--inputs x.npy --targets t.npy --steps 2 --quiet --save ck"),
            0)
      << err;
  std::string bytes = slurp("ck/model.safetensors");
  SafetensorsFile f = readSafetensors(bytes);
  // The CRC-32C of w's 12 bytes (offsets 8..20), as an independent
  // bitwise computation finds it.
  uint32_t crc = ~0u;
  for (size_t i = 8; i < 20; ++i) {
    crc ^= uint8_t(f.data[i]);
    for (int k = 0; k < 8; ++k)
      crc = crc & 1 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  char want[32];
  std::snprintf(want, sizeof(want), "\"crc32c:w\":\"%08x\"", ~crc);
  EXPECT_NE(f.header.find(want), std::string::npos) << want << "\n"
                                                     << f.header;
  auto rewrite = [&](const std::string &name, const std::string &content) {
    std::filesystem::create_directories(dir + "/" + name);
    std::filesystem::copy_file(dir + "/ck/meta.json",
                               dir + "/" + name + "/meta.json",
                               std::filesystem::copy_options::overwrite_existing);
    std::ofstream out(dir + "/" + name + "/model.safetensors",
                      std::ios::binary);
    out.write(content.data(), std::streamsize(content.size()));
  };
  size_t dataStart = 8 + f.headerBytes;
  for (size_t at : {dataStart + 9, dataStart + 21, dataStart + 39}) {
    std::string flipped = bytes;
    flipped[at] = char(flipped[at] ^ 0x10);
    rewrite("flip", flipped);
    EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--steps 4 --resume flip"), 1);
    const char *tensor = at < dataStart + 20   ? "'w'"
                         : at < dataStart + 24 ? "'b'"
                                               : "'b.momentum'";
    EXPECT_ERR_HAS(std::string("tensor ") + tensor +
                   " fails its CRC-32C check");
    EXPECT_ERR_HAS("the file is damaged");
    EXPECT_EQ(out.find("step "), std::string::npos) << "no step ran";
  }
  // The metadata's step edited below the optimizer's 2 updates (the CRC
  // covers the data, not the header).
  {
    std::string header = f.header;
    size_t at = header.find("\"step\":\"2\"");
    ASSERT_NE(at, std::string::npos) << header;
    header.replace(at, 10, "\"step\":\"1\"");
    rewrite("early", bytes.substr(0, 8) + header + bytes.substr(8 + header.size()));
  }
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--steps 4 --resume early"), 1);
  EXPECT_ERR_HAS("is at step 1 by its metadata but its optimizer.step is 2");
  rewrite("trailing", bytes + "x");
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--steps 4 --resume trailing"), 1);
  EXPECT_ERR_HAS("is not a valid safetensors file: 1 bytes after the last "
                 "tensor");
  // The untouched copy resumes.
  rewrite("same", bytes);
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t.npy --steps 3 "
                                   "--quiet --resume same"),
            0)
      << err;
}

// --export-onnx writes the source model with the trained w and b inline
// (the source keeps all its initializers as external data), and it passes
// onnx.checker.
TEST_F(Trainer, ExportOnnx) {
  writeRegressionData(8);
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t.npy --steps 3 "
                                   "--export-onnx out.onnx"),
            1);
  EXPECT_ERR_HAS("error: --export-onnx: the source model "
                 "fake_train_model.onnx does not exist");
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN_LM, "--steps 3 --export-onnx out.onnx"), 1);
  EXPECT_ERR_HAS("error: --export-onnx: the program has no source ONNX "
                 "model");

  ASSERT_TRUE(pythonHas("onnx, numpy"))
      << CLEAVE_PYTHON3 << " has no onnx or numpy, which scripts/setup.sh "
      << "installs (python3-onnx, python3-numpy): the ONNX export is unchecked";
  const char *make = R"(import numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
inits = [numpy_helper.from_array(np.array([0.1, -0.2, 0.3], np.float32), "w"),
         numpy_helper.from_array(np.array(0.0, np.float32), "b"),
         numpy_helper.from_array(np.array([1.5], np.float32), "scale")]
nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]),
         helper.make_node("Add", ["xw", "b"], ["y0"]),
         helper.make_node("Mul", ["y0", "scale"], ["y"])]
graph = helper.make_graph(
    nodes, "fake", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
onnx.save_model(model, "fake_train_model.onnx", save_as_external_data=True,
                all_tensors_to_one_file=True, location="fake_train_model.data",
                size_threshold=0)
)";
  ASSERT_EQ(python(make), 0) << err;
  { std::ofstream file(dir + "/afile"); }
  EXPECT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t.npy --steps 3 "
                                   "--export-onnx afile/out.onnx"),
            1);
  EXPECT_ERR_HAS("error: --export-onnx: cannot create the directory "
                 "afile: ");
  EXPECT_EQ(out.find("step "), std::string::npos) << "no step ran";
  ASSERT_EQ(run(CLEAVE_FAKE_TRAIN, "--inputs x.npy --targets t.npy --steps 3 "
                                   "--quiet --save ck --export-onnx "
                                   "exported/out.onnx"),
            0)
      << err;
  EXPECT_FALSE(exists("exported/out.onnx.tmp"));

  const char *check = R"(import onnx
from onnx import numpy_helper
m = onnx.load("exported/out.onnx", load_external_data=False)
onnx.checker.check_model(m)
for t in m.graph.initializer:
    assert t.data_location == onnx.TensorProto.DEFAULT and not t.external_data, t.name
    print(t.name, " ".join(repr(float(v)) for v in numpy_helper.to_array(t).ravel()))
)";
  ASSERT_EQ(python(check), 0) << err;
  SafetensorsFile ck = readSafetensors(slurp("ck/model.safetensors"));
  ASSERT_EQ(ck.data.size(), 40u);
  float trained[4]; // w then b
  std::memcpy(trained, ck.data.data() + 8, 16);
  std::map<std::string, std::vector<float>> exported;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    for (double v; fields >> v;)
      exported[name].push_back(float(v));
  }
  EXPECT_EQ(exported["w"],
            (std::vector<float>{trained[0], trained[1], trained[2]}))
      << out;
  EXPECT_EQ(exported["b"], (std::vector<float>{trained[3]})) << out;
  EXPECT_EQ(exported["scale"], (std::vector<float>{1.5f})) << out;
  EXPECT_NE(trained[0], 0.1f) << "w was trained";
}

} // namespace
