// A STAND-IN FOR TESTS, NEVER SHIPPED TO UNITY (see UnityEngine.cs): the parts of Unity's modules
// and packages that Samvad.Unity touches. In Unity they live in other assemblies (UnityEngine.UI,
// Unity.TextMeshPro, Unity.XR.Interaction.Toolkit 2.x); here one DLL holds them all, under the
// same namespaces.

using System;
using System.Collections.Generic;
using UnityEngine.EventSystems;
using UnityStandIn;

namespace UnityEngine.Events
{
    public delegate void UnityAction();
    public delegate void UnityAction<T0>(T0 arg0);

    [Serializable]
    public abstract class UnityEventBase { }

    [Serializable]
    public class UnityEvent : UnityEventBase
    {
        readonly List<UnityAction> _calls = new List<UnityAction>();

        public void AddListener(UnityAction call) { _calls.Add(call); }

        public void Invoke()
        {
            foreach (var call in _calls.ToArray()) call();
        }
    }

    [Serializable]
    public class UnityEvent<T0> : UnityEventBase
    {
        readonly List<UnityAction<T0>> _calls = new List<UnityAction<T0>>();

        public void AddListener(UnityAction<T0> call) { _calls.Add(call); }

        public void Invoke(T0 arg0)
        {
            foreach (var call in _calls.ToArray()) call(arg0);
        }
    }
}

namespace UnityEngine.EventSystems
{
    public abstract class UIBehaviour : MonoBehaviour { }
}

namespace UnityEngine.UI
{
    public abstract class Graphic : UIBehaviour { }

    public abstract class MaskableGraphic : Graphic { }

    public class Text : MaskableGraphic
    {
        string _text = "";

        public virtual string text
        {
            get { PlayerLoop.RequireMainThread("get_text"); return _text; }
            set { PlayerLoop.RequireMainThread("set_text"); _text = value ?? ""; }
        }
    }

    public class Selectable : UIBehaviour { }

    /// <summary>Keeps value within [minValue, maxValue], re-clamping when a bound moves, as uGUI does.</summary>
    public class Slider : Selectable
    {
        float _min;
        float _max = 1f;
        float _value;

        public float minValue
        {
            get { PlayerLoop.RequireMainThread("get_minValue"); return _min; }
            set { PlayerLoop.RequireMainThread("set_minValue"); _min = value; _value = Clamp(_value); }
        }

        public float maxValue
        {
            get { PlayerLoop.RequireMainThread("get_maxValue"); return _max; }
            set { PlayerLoop.RequireMainThread("set_maxValue"); _max = value; _value = Clamp(_value); }
        }

        public virtual float value
        {
            get { PlayerLoop.RequireMainThread("get_value"); return _value; }
            set { PlayerLoop.RequireMainThread("set_value"); _value = Clamp(value); }
        }

        float Clamp(float v) { return Mathf.Clamp(v, Math.Min(_min, _max), Math.Max(_min, _max)); }
    }
}

namespace TMPro
{
    public abstract class TMP_Text : UnityEngine.UI.MaskableGraphic
    {
        string _text = "";

        public virtual string text
        {
            get { PlayerLoop.RequireMainThread("get_text"); return _text; }
            set { PlayerLoop.RequireMainThread("set_text"); _text = value ?? ""; }
        }
    }

    public class TextMeshProUGUI : TMP_Text { }
}

namespace UnityEngine.XR.Interaction.Toolkit
{
    using UnityEngine.Events;

    // XRI 2.x: the interfaces are in this namespace (3.x moved them to .Interactables and
    // .Interactors, which code that never names them, like SamvadSession, does not notice).
    public interface IXRInteractable
    {
        Transform transform { get; }
    }

    public interface IXRSelectInteractable : IXRInteractable { }

    public interface IXRInteractor
    {
        Transform transform { get; }
    }

    public interface IXRSelectInteractor : IXRInteractor { }

    public abstract class BaseInteractionEventArgs
    {
        public IXRInteractor interactorObject { get; set; }
        public IXRInteractable interactableObject { get; set; }
    }

    public class SelectEnterEventArgs : BaseInteractionEventArgs
    {
        public new IXRSelectInteractor interactorObject
        {
            get { return (IXRSelectInteractor)base.interactorObject; }
            set { base.interactorObject = value; }
        }

        public new IXRSelectInteractable interactableObject
        {
            get { return (IXRSelectInteractable)base.interactableObject; }
            set { base.interactableObject = value; }
        }
    }

    public class SelectExitEventArgs : BaseInteractionEventArgs
    {
        public new IXRSelectInteractor interactorObject
        {
            get { return (IXRSelectInteractor)base.interactorObject; }
            set { base.interactorObject = value; }
        }

        public new IXRSelectInteractable interactableObject
        {
            get { return (IXRSelectInteractable)base.interactableObject; }
            set { base.interactableObject = value; }
        }

        public bool isCanceled { get; set; }
    }

    [Serializable] public sealed class SelectEnterEvent : UnityEvent<SelectEnterEventArgs> { }
    [Serializable] public sealed class SelectExitEvent : UnityEvent<SelectExitEventArgs> { }

    /// <summary>Only its two select events: a test raises them as XRI does when a hand grabs and lets go
    /// (UnityStandIn.Hands).</summary>
    public class XRGrabInteractable : MonoBehaviour, IXRSelectInteractable
    {
        SelectEnterEvent _selectEntered = new SelectEnterEvent();
        SelectExitEvent _selectExited = new SelectExitEvent();

        public SelectEnterEvent selectEntered { get { return _selectEntered; } set { _selectEntered = value; } }
        public SelectExitEvent selectExited { get { return _selectExited; } set { _selectExited = value; } }
    }
}
