// The voice helpers against a live server (docs/voice.md): stream a recorded utterance through
// MicrophoneStream as a headset would, hear the vendor through VendorVoice, barge in after a moment
// of his first reply (the server stops sending that reply's audio and answers `heard`), then send a
// second utterance as one clip and listen to the reply to its end (reported as heard to the end).
//   mono Harness.exe --url URL --voice utterance.wav   (PCM16 mono 16 kHz)

using System;
using System.IO;
using System.Threading;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;
using Samvad.Client;

namespace Samvad.Harness
{
    sealed partial class Run
    {
        public async Task VoiceAsync(string wavPath)
        {
            byte[] pcm = ReadPcm(File.ReadAllBytes(wavPath));
            using (var api = Api())
            {
                var info = await api.CreateSessionAsync(new CreateSessionRequest { LearnerId = Learner("unity-voice") })
                                    .ConfigureAwait(false);
                var options = Options(false);
                options.Voice = true;
                var player = new SamvadClient(_url, info.SessionId, info.PlayerToken, options);
                var voice = new VendorVoice(player);
                var heardSpeech = new TaskCompletionSource<SpeechEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
                var firstAudio = new TaskCompletionSource<ReplyAudioEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
                var heard = new TaskCompletionSource<HeardEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
                var heardToEnd = new TaskCompletionSource<HeardEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
                int chunksAfterBargeIn = 0;
                int bargedTurn = -1;
                player.SpeechHeard += s => heardSpeech.TrySetResult(s);
                int withVisemes = 0, withoutVisemes = 0;
                player.ReplyAudio += a =>
                {
                    // The ordering under Mono: a chunk of sound brings its own timeline, from 0, rising.
                    if (a.Pcm.Length > 0 && !a.Degraded)
                    {
                        var own = new VisemeTimeline();
                        own.Add(0, a.Visemes, a.SampleRate, true);
                        if (own.Violations == 0 && own.Pairs > 0) Interlocked.Increment(ref withVisemes);
                        else Interlocked.Increment(ref withoutVisemes);
                    }
                    if (a.Pcm.Length > 0 && !a.Filler) firstAudio.TrySetResult(a);
                    if (heard.Task.IsCompleted && a.Turn == bargedTurn) Interlocked.Increment(ref chunksAfterBargeIn);
                };
                player.Heard += h => (h.Interrupted ? heard : heardToEnd).TrySetResult(h);
                try
                {
                    await Within(player.ConnectAsync(), Step, "connecting the player").ConfigureAwait(false);

                    // 1. A streamed utterance, in 100 ms chunks as the microphone gives them.
                    var mic = player.BeginUtterance();
                    for (int i = 0; i < pcm.Length; i += 3200)
                    {
                        mic.Write(pcm, i, Math.Min(3200, pcm.Length - i));
                        await Task.Delay(20).ConfigureAwait(false);
                    }
                    var turn = mic.End();
                    var speech = await Within(heardSpeech.Task, Step, "the speech event").ConfigureAwait(false);
                    Check(speech.Id == mic.Id && !string.IsNullOrEmpty(speech.Text), "speech names the utterance and has words");
                    Fact("speech_text", speech.Text);
                    Fact("speech_confidence", speech.Confidence.HasValue ? (JToken)speech.Confidence.Value : JValue.CreateNull());
                    Fact("stt", speech.Stt);
                    Fact("speech_levels", speech.Levels == null ? 0 : speech.Levels.Count);
                    var reply = await Within(turn.Reply, Step, "the reply to the utterance").ConfigureAwait(false);
                    Check(reply.InReplyTo == mic.Id && reply.Mark == null, "the utterance was a turn, answered");
                    Fact("reply_turn", reply.Turn);
                    var audio = await Within(firstAudio.Task, Step, "the vendor's first audio").ConfigureAwait(false);
                    Fact("sample_rate", audio.SampleRate);
                    Fact("tts", audio.Tts);
                    Fact("visemes_source", audio.VisemesSource);
                    // The voice stages (docs/voice.md, "Per-stage timings"): STT on the speech and the
                    // reply, the speech service's first byte and the first audio on the reply's first sound.
                    Fact("speech_stt_ms", Ms(speech.SttMs));
                    Fact("reply_stt_ms", Ms(reply.Timings == null ? null : reply.Timings.SttMs));
                    Fact("reply_end_of_turn_ms", Ms(reply.Timings == null ? null : reply.Timings.EndOfTurnMs));
                    Fact("first_audio_in_reply_to", audio.Timings == null ? null : audio.Timings.InReplyTo);
                    Fact("first_audio_ms", Ms(audio.Timings == null ? (double?)null : audio.Timings.FirstAudioMs));
                    Fact("tts_first_byte_ms", Ms(audio.Timings == null ? (double?)null : audio.Timings.TtsFirstByteMs));

                    // 2. Listen to a little of it, then talk over him.
                    var buffer = new float[audio.SampleRate / 5];
                    voice.Read(buffer, 0, buffer.Length);
                    int played = voice.Read(buffer, 0, buffer.Length);
                    bargedTurn = voice.Turn;
                    var playback = voice.BargeIn();
                    Check(playback != null, "a barge-in while the vendor speaks reports playback");
                    var cut = await Within(heard.Task, Step, "the heard event of the barge-in").ConfigureAwait(false);
                    Check(cut.Interrupted && cut.Turn == reply.Turn, "heard: interrupted, for the reply's turn");
                    Fact("barge_in_heard_chars", cut.HeardChars);
                    Fact("played_samples", played);
                    await Task.Delay(600).ConfigureAwait(false);
                    Fact("audio_after_barge_in", chunksAfterBargeIn);
                    Check(!voice.Speaking, "nothing left to play after the barge-in");

                    // 3. A whole clip, kept until acknowledged, and his answer heard to the end.
                    var clip = player.SendUtterance(pcm);
                    var second = await Within(clip.Reply, Step, "the reply to the clip").ConfigureAwait(false);
                    Fact("clip_reply_turn", second.Turn);
                    var deadline = DateTime.UtcNow + Step;
                    var seen = new System.Collections.Generic.HashSet<int>();
                    while (!heardToEnd.Task.IsCompleted && DateTime.UtcNow < deadline)
                    {
                        voice.Read(buffer, 0, buffer.Length / 4);  // 50 ms a read: the mouth sampled as it plays
                        seen.Add(voice.VisemeAt(0));
                        await Task.Delay(5).ConfigureAwait(false);
                    }
                    Fact("visemes_seen", seen.Count);
                    var whole = await Within(heardToEnd.Task, Step, "the heard event of a reply played to the end")
                                      .ConfigureAwait(false);
                    Check(!whole.Interrupted && whole.Turn == second.Turn && whole.HeardChars == second.Text.Length,
                          "the second reply was heard to its end");
                    Fact("chunks", voice.Chunks);
                    Fact("chunks_with_visemes", withVisemes);
                    Fact("chunks_without_visemes", withoutVisemes);
                    Fact("viseme_violations", voice.VisemeViolations);
                    Check(withoutVisemes == 0 && voice.VisemeViolations == 0, "every chunk of sound came with its visemes");
                }
                finally
                {
                    await player.CloseAsync().ConfigureAwait(false);
                }
            }
        }

        static byte[] ReadPcm(byte[] wav)
        {
            for (int i = 12; i + 8 <= wav.Length;)
            {
                string id = System.Text.Encoding.ASCII.GetString(wav, i, 4);
                int size = BitConverter.ToInt32(wav, i + 4);
                if (id == "data")
                {
                    var pcm = new byte[Math.Min(size, wav.Length - i - 8)];
                    Array.Copy(wav, i + 8, pcm, 0, pcm.Length);
                    return pcm;
                }
                i += 8 + size + (size & 1);
            }
            throw new InvalidDataException("no data chunk in the WAV");
        }
    }
}
