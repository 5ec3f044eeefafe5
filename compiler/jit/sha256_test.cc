// Tests for Sha256 against FIPS 180-4 / NIST example digests (also checked
// with coreutils' sha256sum).
#include "compiler/jit/sha256.h"

#include <string>

#include <gtest/gtest.h>

namespace kiln::jit {
namespace {

TEST(Sha256, NistVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalUpdatesMatchOneShot) {
  std::string text;
  for (int i = 0; i < 13; ++i) text += "0123456789";  // 130 bytes: 3 blocks
  const std::string want = "426f26da928927a3520b61ade620dc7c69ed4d315425929fa04d9a993a22a0f3";
  EXPECT_EQ(Sha256Hex(text), want);
  for (size_t chunk : {1u, 7u, 63u, 64u, 65u}) {
    Sha256 h;
    for (size_t i = 0; i < text.size(); i += chunk) h.Update(text.substr(i, chunk));
    EXPECT_EQ(h.HexDigest(), want) << "chunk " << chunk;
  }
}

TEST(Sha256, DigestDoesNotFinalizeTheState) {
  Sha256 h;
  h.Update("ab");
  (void)h.HexDigest();
  h.Update("c");
  EXPECT_EQ(h.HexDigest(), Sha256Hex("abc"));
}

}  // namespace
}  // namespace kiln::jit
