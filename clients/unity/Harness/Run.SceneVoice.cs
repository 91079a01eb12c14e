// --scene --voice FILE.wav: SamvadVoice in the stand-in's player loop against a live voice server.
// The learner says the recording into the stand-in microphone (in real time) between BeginSpeaking
// and EndSpeaking; Ramesh's answer comes out of the AudioSource through OnAudioFilterRead on the
// stand-in's audio thread; the learner talks over him (a barge-in: he must fall silent at once and
// the server hears how much was heard), and his answer to that is played to its end.

using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using Samvad.Client;
using Samvad.Unity;
using UnityEngine;
using UnityStandIn;

namespace Samvad.Harness
{
    sealed partial class Run
    {
        void PlayVoiceScene(string wavPath)
        {
            byte[] pcm = ReadPcm(File.ReadAllBytes(wavPath));
            var speech = new float[pcm.Length / 2];
            for (int i = 0; i < speech.Length; i++) speech[i] = (short)(pcm[2 * i] | (pcm[2 * i + 1] << 8)) / 32768f;
            AudioThread.Start(outputRate: 48000, bufferFrames: 1024, channels: 2);

            GameObject ramesh;
            var session = Ramesh("unity-scene-voice", out ramesh);
            Serialized.Set(session, "voice", true);
            var voice = ramesh.AddComponent<SamvadVoice>();
            var source = ramesh.GetComponent<AudioSource>();
            Check(source != null, "[RequireComponent] added the AudioSource");
            voice.session = session;
            var face = ramesh.AddComponent<SkinnedMeshRenderer>();
            voice.face = face;
            for (int i = 0; i < VisemeTimeline.Count; i++) voice.visemeBlendShapes[i] = 100 + i;
            var events = new SceneEvents(session);
            ramesh.SetActive(true);
            Until(() => session.Client != null && session.Client.IsConnected, "the voice session connecting");
            var heard = new List<HeardEvent>();
            session.Client.Heard += h => heard.Add(h);  // raised through Unity's context: the main thread
            var meter = AudioThread.Meter(source);

            // 1. Push-to-talk: the microphone records the utterance, then the button is released.
            voice.BeginSpeaking();
            MicrophoneInput.Say(speech);
            Until(() => MicrophoneInput.Unrecorded == 0, "the microphone recording the utterance");
            PlayerLoop.RunFrames(3);
            var turn = voice.EndSpeaking();
            Check(turn != null, "EndSpeaking made a turn");
            Until(() => events.VendorLines.Count > 0, "Ramesh's answer to the spoken turn");
            var reply = Await(turn.Reply, "the turn's reply");
            Check(reply.Text == events.VendorLines[0], "onVendorLine showed the answer to the utterance");
            Fact("voice_reply", reply.Text);
            Fact("voice_reply_turn", reply.Turn);

            // 2. His voice on the speakers (a fifth of a second of it: short replies are under a second).
            Until(() => meter.LoudFrames > 48000 / 5, "Ramesh's voice coming out of the AudioSource");
            Fact("voice_peak", Math.Round(meter.Peak, 3));

            // 3. The learner talks over him: silence at once, and the server is told what was heard.
            long loudBefore = meter.LoudFrames;
            voice.BeginSpeaking();
            long loudAtBargeIn = meter.LoudFrames;
            MicrophoneInput.Say(speech);
            Until(() => heard.Count > 0, "the heard event of the barge-in");
            Until(() => MicrophoneInput.Unrecorded == 0, "the microphone recording the second utterance");
            PlayerLoop.RunFrames(3);
            Fact("loud_frames_while_learner_spoke", meter.LoudFrames - loudAtBargeIn);
            Fact("loud_frames_before_barge_in", loudBefore);
            Fact("barge_in", new Newtonsoft.Json.Linq.JObject
            {
                ["turn"] = heard[0].Turn,
                ["interrupted"] = heard[0].Interrupted,
                ["heard_chars"] = heard[0].HeardChars,
                ["heard_text"] = heard[0].HeardText,
            });
            var second = voice.EndSpeaking();
            Check(second != null, "the second EndSpeaking made a turn");

            // 4. His answer to that, played to its end: reported by itself as heard whole.
            var secondReply = Await(second.Reply, "the reply to the second utterance");
            Fact("second_reply", secondReply.Text);
            Fact("second_reply_turn", secondReply.Turn);
            long loudBeforeSecond = meter.LoudFrames;
            // His mouth moves with it: the strongest blendshape, frame by frame, as LateUpdate sets them.
            var shapes = new HashSet<int>();
            Until(() =>
            {
                int strongest = 0;
                for (int i = 1; i < VisemeTimeline.Count; i++)
                {
                    if (face.GetBlendShapeWeight(100 + i) > face.GetBlendShapeWeight(100 + strongest)) strongest = i;
                }
                shapes.Add(strongest);
                return heard.Any(h => !h.Interrupted);
            }, "the second answer played to its end");
            Fact("mouth_shapes", shapes.Count);
            var whole = heard.First(h => !h.Interrupted);
            Fact("heard_to_end", new Newtonsoft.Json.Linq.JObject
            {
                ["turn"] = whole.Turn,
                ["heard_chars"] = whole.HeardChars,
                ["seconds_played"] = Math.Round((meter.LoudFrames - loudBeforeSecond) / 48000.0, 2),
            });
            Fact("vendor_lines", new Newtonsoft.Json.Linq.JArray(events.VendorLines.ToArray()));
            Fact("events_off_main_thread", events.OffMainThread);
            Fact("session_id", Serialized.Get<string>(session, "sessionId"));
            Fact("player_token", Serialized.Get<string>(session, "playerToken"));

            var client = session.Client;
            UnityEngine.Object.Destroy(ramesh);
            Until(() => client.StoppedBecause != null, "OnDestroy closing the voice session");
            PlayerLoop.RunFrames(3);
        }
    }
}
