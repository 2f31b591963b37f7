// quantization_config parsing (io/quantization_config.h): each FP8 format as
// published, and a refusal naming the field for everything else.
#include "io/quantization_config.h"

#include <gtest/gtest.h>

#include "io/hf_config.h"

namespace pagoda {
namespace {

// RedHatAI/...-FP8-dynamic's quantization_config, with the group's
// weights/activations replaced by `weights` / `acts`.
std::string compressed(const std::string& weights, const std::string& acts,
                       const std::string& extra = "") {
  return R"({"quant_method": "compressed-tensors", "format": "float-quantized",
    "quantization_status": "compressed", "kv_cache_scheme": null, "ignore": ["lm_head"],
    "config_groups": {"group_0": {"targets": ["Linear"], "output_activations": null,
      "weights": )" +
         weights + R"(, "input_activations": )" + acts + "}}" + extra + "}";
}
const std::string kChannel =
    R"({"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true, "dynamic": false, "group_size": null})";
const std::string kTensorW =
    R"({"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": true, "dynamic": false})";
const std::string kToken =
    R"({"num_bits": 8, "type": "float", "strategy": "token", "symmetric": true, "dynamic": true})";
const std::string kStaticTensor =
    R"({"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": true, "dynamic": false})";

QuantizationConfig ok(const std::string& text) {
  Result<QuantizationConfig> q = parse_quantization_config(text, "c.json: quantization_config");
  EXPECT_TRUE(q.ok()) << q.error().message;
  return q.ok() ? q.value() : QuantizationConfig();
}

// The error, which must name `field`.
std::string refused(const std::string& text, const std::string& field) {
  Result<QuantizationConfig> q = parse_quantization_config(text, "c.json: quantization_config");
  EXPECT_FALSE(q.ok()) << text;
  if (q.ok()) return "";
  EXPECT_NE(q.error().message.find("'" + field + "'"), std::string::npos) << q.error().message;
  EXPECT_NE(q.error().message.find("c.json"), std::string::npos) << q.error().message;
  return q.error().message;
}

TEST(QuantizationConfig, CompressedTensorsDynamicPerChannel) {
  const QuantizationConfig q = ok(compressed(kChannel, kToken));
  EXPECT_EQ(q.method, QuantMethod::kCompressedTensors);
  EXPECT_EQ(q.weight_scales, Fp8WeightScales::kChannel);
  EXPECT_FALSE(q.static_activations);
  EXPECT_EQ(q.ignore, std::vector<std::string>{"lm_head"});
  EXPECT_EQ(describe_quantization(q, "bf16"),
            "fp8 (w8a8, dynamic per-token; per-channel weight scales; compressed-tensors)");
}

TEST(QuantizationConfig, CompressedTensorsStaticPerTensor) {
  std::string naive = compressed(kTensorW, kStaticTensor);
  naive.replace(naive.find("float-quantized"), 15, "naive-quantized");
  const QuantizationConfig q = ok(naive);
  EXPECT_EQ(q.weight_scales, Fp8WeightScales::kTensor);
  EXPECT_TRUE(q.static_activations);
}

TEST(QuantizationConfig, CompressedTensorsBlock) {
  const QuantizationConfig q = ok(compressed(
      R"({"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128], "dynamic": false})",
      R"({"num_bits": 8, "type": "float", "strategy": "group", "group_size": 128, "dynamic": true})"));
  EXPECT_EQ(q.weight_scales, Fp8WeightScales::kBlock);
  EXPECT_EQ(q.block, 128);
  EXPECT_EQ(q.block_scale_name, "weight_scale");
}

TEST(QuantizationConfig, CompressedTensorsRefusals) {
  refused(compressed(R"({"num_bits": 4, "type": "int", "strategy": "channel"})", kToken),
          "num_bits");
  refused(compressed(R"({"num_bits": 8, "type": "int", "strategy": "channel"})", kToken), "type");
  refused(compressed(R"({"num_bits": 8, "type": "float", "strategy": "group", "group_size": 128})",
                     kToken),
          "group_size");
  refused(compressed(R"({"num_bits": 8, "type": "float", "strategy": "group"})", kToken),
          "strategy");
  refused(
      compressed(R"({"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": false})",
                 kToken),
      "symmetric");
  refused(compressed(kChannel, "null"), "input_activations");
  refused(compressed(kChannel,
                     R"({"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": true})"),
          "strategy");
  refused(compressed(kChannel,
                     R"({"num_bits": 8, "type": "float", "strategy": "token", "dynamic": false})"),
          "strategy");
  refused(compressed(kChannel, R"({"num_bits": 8, "type": "float", "strategy": "token"})"),
          "dynamic");
  refused(
      R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {}})",
      "format");
  refused(R"({"quant_method": "compressed-tensors", "format": "float-quantized"})",
          "config_groups");
  std::string ignore = compressed(kChannel, kToken, R"(, "ignore": "lm_head")");
  ignore.erase(ignore.find(R"("ignore": ["lm_head"],)"), 22);
  refused(ignore, "ignore");
  // Two groups with different schemes.
  std::string two = compressed(kChannel, kToken);
  two.replace(two.find("\"group_0\""), 9,
              R"("group_1": {"weights": )" + kTensorW + R"(, "input_activations": )" +
                  kStaticTensor + R"(}, "group_0")");
  refused(two, "config_groups");
}

TEST(QuantizationConfig, ModelOpt) {
  const QuantizationConfig q = ok(
      R"({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": null, "exclude_modules": ["lm_head"]})");
  EXPECT_EQ(q.method, QuantMethod::kModelOpt);
  EXPECT_EQ(q.weight_scales, Fp8WeightScales::kTensor);
  EXPECT_TRUE(q.static_activations);
  EXPECT_EQ(q.ignore, std::vector<std::string>{"lm_head"});
  refused(R"({"quant_method": "modelopt", "quant_algo": "NVFP4"})", "quant_algo");
  Result<QuantizationConfig> file = parse_hf_quant_config(
      R"({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "exclude_modules": ["lm_head"]}})",
      "m/hf_quant_config.json");
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(file->method, QuantMethod::kModelOpt);
  Result<QuantizationConfig> bad = parse_hf_quant_config(
      R"({"quantization": {"quant_algo": "W4A8_AWQ"}})", "m/hf_quant_config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("'quant_algo'"), std::string::npos);
  EXPECT_NE(bad.error().message.find("hf_quant_config.json"), std::string::npos);
}

TEST(QuantizationConfig, Fp8BlockAndPerTensor) {
  const QuantizationConfig b = ok(
      R"({"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]})");
  EXPECT_EQ(b.method, QuantMethod::kFp8);
  EXPECT_EQ(b.weight_scales, Fp8WeightScales::kBlock);
  EXPECT_EQ(b.block, 128);
  EXPECT_EQ(b.block_scale_name, "weight_scale_inv");
  EXPECT_EQ(describe_quantization(b, "bf16"),
            "fp8 (w8a8, dynamic per-token per-128-column group; 128x128 block weight scales; "
            "fp8 checkpoint)");
  const QuantizationConfig t = ok(R"({"quant_method": "fp8", "activation_scheme": "static"})");
  EXPECT_EQ(t.weight_scales, Fp8WeightScales::kTensor);
  EXPECT_TRUE(t.static_activations);
  refused(R"({"quant_method": "fp8", "fmt": "e5m2"})", "fmt");
  refused(
      R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 64]})",
      "weight_block_size");
  refused(
      R"({"quant_method": "fp8", "activation_scheme": "static", "weight_block_size": [128, 128]})",
      "activation_scheme");
  refused(R"({"quant_method": "fp8", "activation_scheme": "sometimes"})", "activation_scheme");
}

TEST(QuantizationConfig, OtherMethodsRefused) {
  for (const char* m : {"bitsandbytes", "mxfp4", "awq_marlin"})
    refused(std::string(R"({"quant_method": ")") + m + R"(", "bits": 4})", "quant_method");
  refused(R"({"bits": 4})", "quant_method");
}

TEST(QuantizationConfig, IntegerFormatsAreLeftToTheirParser) {
  for (const char* m : {"awq", "gptq"}) {
    Result<QuantizationConfig> q =
        parse_quantization_config(std::string(R"({"quant_method": ")") + m + R"(", "bits": 4})", "q");
    ASSERT_TRUE(q.ok()) << m << ": " << q.error().message;
    EXPECT_FALSE(q->fp8()) << m;
  }
}

TEST(QuantizationConfig, OnlineAndFlag) {
  const QuantizationConfig q = online_fp8_config();
  EXPECT_EQ(q.weight_scales, Fp8WeightScales::kChannel);
  EXPECT_FALSE(q.static_activations);
  EXPECT_EQ(describe_quantization(q, "bf16"),
            "fp8 (w8a8, dynamic per-token; per-channel weight scales; quantised at load, "
            "--quantization fp8)");
  EXPECT_EQ(describe_quantization(QuantizationConfig(), "bf16"), "bf16");
  EXPECT_TRUE(check_quantization_flag("fp8").ok());
  EXPECT_TRUE(check_quantization_flag("").ok());
  const Status st = check_quantization_flag("awq");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("--quantization 'awq'"), std::string::npos);
}

TEST(QuantizationConfig, ReadFromConfigJson) {
  const std::string config = R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 10,
    "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
    "num_key_value_heads": 1, "max_position_embeddings": 64, "quantization_config": {"quant_method": "fp8",
    "activation_scheme": "dynamic", "weight_block_size": [128, 128]}})";
  Result<ModelConfig> c = parse_hf_config(config, "m/config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->quantization.method, QuantMethod::kFp8);
  std::string bad = config;
  bad.replace(bad.find("\"fp8\""), 5, "\"int4\"");
  Result<ModelConfig> r = parse_hf_config(bad, "m/config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("m/config.json: quantization_config"), std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace pagoda
