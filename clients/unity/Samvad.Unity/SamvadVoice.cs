// The learner's microphone and Ramesh's voice in a Unity scene, over Samvad.Client's
// MicrophoneStream and VendorVoice (docs/voice.md). Needs Unity's assemblies (or, for the tests, the
// stand-in, like SamvadSession.cs). Put it next to a SamvadSession (whose client must be created with
// SamvadClientOptions.Voice = true) and an AudioSource for the vendor's mouth.
//   - Push-to-talk: call BeginSpeaking() when the learner presses, EndSpeaking() on release; a
//     voice activity detector can call the same two. Starting to speak while Ramesh talks is a
//     barge-in: his playback stops and the server is told how much was heard.
//   - The vendor's audio is pulled on the audio thread (OnAudioFilterRead), at the synthesizer's
//     rate resampled to the output rate (Samvad.Client's Resampler, which keeps the position between
//     two source samples from one callback to the next), so playback starts with the first chunk.
//   - His mouth: each frame (LateUpdate) the viseme weights at the sample being played, plus
//     `visemeLeadMs`, go to `face`'s blendshapes (one index per viseme, -1 for none) and to
//     `VisemeWeights` for any other rig. The position is the audio's own sample clock (what the
//     audio thread has played, as AudioSource.timeSamples counts a clip's), never the wall clock.
#if UNITY_5_3_OR_NEWER
using System;
using Samvad.Client;
using UnityEngine;

namespace Samvad.Unity
{
    [RequireComponent(typeof(AudioSource))]
    public sealed class SamvadVoice : MonoBehaviour
    {
        [Tooltip("The session whose client speaks (created with SamvadClientOptions.Voice = true)")]
        public SamvadSession session;
        [Tooltip("Microphone device name; empty for the default")]
        public string device = "";
        [Tooltip("The longest utterance, in seconds (the server refuses more than MAX_UTTERANCE_SECONDS)")]
        public int maxSeconds = 30;
        [Tooltip("Ramesh's face, whose blendshapes take the viseme weights (optional)")]
        public SkinnedMeshRenderer face;
        [Tooltip("The blendshape index of each viseme, in OpenXR's order: sil PP FF TH DD kk CH SS nn RR aa E ih oh ou (-1: none)")]
        public int[] visemeBlendShapes = { -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1 };
        [Tooltip("How far ahead of the sound the mouth moves, in ms: lips form a shape before it is heard")]
        public float visemeLeadMs = 40f;
        [Tooltip("How long a mouth shape takes to form, in ms")]
        public float visemeBlendMs = 50f;

        /// <summary>This frame's weight (0-1) of each of the 15 visemes.</summary>
        public readonly float[] VisemeWeights = new float[VisemeTimeline.Count];

        VendorVoice _voice;
        MicrophoneStream _utterance;
        AudioClip _mic;
        int _micPosition;
        int _outputRate;
        readonly Resampler _resampler = new Resampler();
        volatile Func<float[], int, int, int> _read;  // _voice.Read, made once (set after _voice): no allocation per callback
        float[] _micBuffer = new float[0];

        void Start()
        {
            _outputRate = AudioSettings.outputSampleRate;
            var source = GetComponent<AudioSource>();
            source.loop = true;
            source.Play();  // OnAudioFilterRead below supplies the samples
        }

        void Update()
        {
            if (_voice == null && session != null && session.Client != null)
            {
                _voice = new VendorVoice(session.Client);
                _read = _voice.Read;
            }
            if (_utterance == null || _mic == null) return;
            int position = Microphone.GetPosition(device);
            int count = position - _micPosition;
            if (count < 0) count += _mic.samples;
            if (count <= 0) return;
            if (_micBuffer.Length < count) _micBuffer = new float[count];
            _mic.GetData(_micBuffer, _micPosition);  // wraps around the ring buffer itself
            _utterance.Write(_micBuffer, 0, count);
            _micPosition = position;
        }

        void LateUpdate()
        {
            var voice = _voice;
            if (voice == null || voice.SampleRate == 0) return;
            int lead = (int)(visemeLeadMs * voice.SampleRate / 1000f);
            int blend = (int)(visemeBlendMs * voice.SampleRate / 1000f);
            voice.VisemeWeights(VisemeWeights, lead, blend);
            if (face == null || visemeBlendShapes == null) return;
            for (int i = 0; i < VisemeTimeline.Count && i < visemeBlendShapes.Length; i++)
            {
                if (visemeBlendShapes[i] >= 0) face.SetBlendShapeWeight(visemeBlendShapes[i], VisemeWeights[i] * 100f);
            }
        }

        /// <summary>The learner starts speaking (push-to-talk pressed): barge in if Ramesh talks.</summary>
        public void BeginSpeaking()
        {
            if (session == null || session.Client == null || _utterance != null) return;
            if (_voice != null && _voice.Speaking) _voice.BargeIn();
            _mic = Microphone.Start(device, true, maxSeconds, SamvadClient.MicrophoneRate);
            _micPosition = 0;
            _utterance = session.Client.BeginUtterance();
        }

        /// <summary>The learner stopped speaking: the utterance becomes a turn.</summary>
        public PendingFrame EndSpeaking()
        {
            if (_utterance == null) return null;
            Update();  // the last samples
            Microphone.End(device);
            var turn = _utterance.End();
            _utterance = null;
            return turn;
        }

        // The audio thread: the vendor's samples, resampled by nearest neighbour to the output rate.
        void OnAudioFilterRead(float[] data, int channels)
        {
            var read = _read;
            var voice = _voice;
            if (read == null || voice == null || voice.SampleRate == 0) return;
            _resampler.Fill(data, channels, voice.SampleRate, _outputRate, read);
        }
    }
}
#endif
